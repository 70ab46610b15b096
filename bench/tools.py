"""The benchmark's MCP server: one trivial tool, so `pizzabot bench` times the engine, not a tool.

`echo` answers at once with its own wall-clock time and process ids. The bench reads them back
from the run's TOOL_RESULT events: the time is when the tool body really ran (the end of
"decision → tool"), and the parent process id tells which worker process ran the call. When
`BENCH_TOOLS_LOG` names a file, every call also appends a line to it, so a call that ran twice
shows even if its second result was never recorded.

Run: `python -m bench.tools` (stdio).
"""

from __future__ import annotations

import json
import os
import time
from typing import Annotated

from pydantic import Field

LOG_ENV = "BENCH_TOOLS_LOG"


def echo(
    tag: Annotated[str, Field(description="Which run asked (the bench's tag)")],
    i: Annotated[int, Field(description="Which call of that run")] = 0,
) -> str:
    """Answer at once with when and where the call ran."""
    line = json.dumps(
        {"tag": tag, "i": i, "t": time.time(), "pid": os.getpid(), "ppid": os.getppid()}
    )
    path = os.environ.get(LOG_ENV)
    if path:
        # One short write in append mode: lines from several processes do not interleave.
        with open(path, "a", encoding="utf-8") as f:
            f.write(line + "\n")
    return line


def main() -> None:
    from mcp.server.mcpserver import MCPServer

    server = MCPServer(
        "bench", instructions="A no-op tool for timing the engine.", log_level="WARNING"
    )
    server.add_tool(echo)
    server.run()


if __name__ == "__main__":
    main()
