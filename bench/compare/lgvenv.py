"""The virtualenv the LangGraph side of `pizzabot bench --compare langgraph` runs in.

LangGraph and its MCP adapter are never dependencies of Pizza Bot (the adapter needs
`mcp < 2`; Pizza Bot runs on mcp 2), so the bench makes a virtualenv of its own with `uv`,
from the package registry, with the versions pinned here. It is made once and reused while
its pins match (a stamp file in it records what was installed).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

#: Exactly what the comparison was measured with. `mcp` 1.x: the adapter's own bound.
PINS: tuple[str, ...] = (
    "langgraph==1.2.22",
    "langgraph-checkpoint==4.3.2",
    "langgraph-checkpoint-sqlite==3.1.2",
    "langchain-core==1.8.1",
    "langchain-mcp-adapters==0.3.2",
    "langchain-openai==1.7.4",
    "mcp==1.30.0",
    "aiosqlite==0.22.1",
)

STAMP = "pizzabot-bench-pins.txt"


class VenvError(RuntimeError):
    """The LangGraph virtualenv could not be made."""


def _uv() -> str:
    """`uv` next to this interpreter (a checkout's venv has it), else on PATH."""
    here = Path(sys.executable).with_name("uv")
    if here.exists():
        return str(here)
    found = shutil.which("uv")
    if found is None:
        raise VenvError("pizzabot bench --compare needs uv to make its LangGraph virtualenv")
    return found


def python_of(folder: Path) -> Path:
    return folder / "bin" / "python"


def ensure(folder: Path, *, log: Path | None = None, pins: tuple[str, ...] = PINS) -> Path:
    """The virtualenv's Python, made (or remade) when its pins differ from `pins` (LangGraph's
    by default; `bench.compare.hitl` makes awaithumans's the same way)."""
    wanted = "\n".join(pins) + "\n"
    stamp = folder / STAMP
    python = python_of(folder)
    if python.exists() and stamp.exists() and stamp.read_text() == wanted:
        return python
    uv = _uv()
    if folder.exists():
        shutil.rmtree(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    steps = [
        [uv, "venv", "--quiet", "--python", sys.executable, str(folder)],
        [uv, "pip", "install", "--quiet", "--compile-bytecode", "--python", str(python), *pins],
    ]
    for step in steps:
        done = subprocess.run(step, capture_output=True, text=True, timeout=900)
        if log is not None:
            with open(log, "a", encoding="utf-8") as out:
                out.write(" ".join(step) + "\n" + done.stdout + done.stderr)
        if done.returncode != 0:
            raise VenvError(f"{' '.join(step[:3])} failed:\n{done.stderr[-3000:]}")
    stamp.write_text(wanted)
    return python
