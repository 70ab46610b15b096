"""A "contacts" MCP server for tests of Undo: adding a contact answers its new id as JSON,
and deleting one (the compensating call) needs that id.

    python tests/peers/mcp_contacts.py      # serve over stdin/stdout

Both tools append what they did to the JSON-lines file named by `MCP_TOOLS_LOG` (as the
"crm" server does, `tests.peers.mcp_tools`), so a test can tell what really ran.
"""

from __future__ import annotations

import json
import os
import zlib
from pathlib import Path
from typing import Annotated, Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

SCRIPT = Path(__file__).resolve()


LOG_ENV = "MCP_TOOLS_LOG"


def _log(tool: str, args: dict[str, Any]) -> None:
    path = os.environ.get(LOG_ENV)
    if path:
        line = {"tool": tool, "event": "called", "args": args, "pid": os.getpid()}
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps(line) + "\n")


def contact_id(email: str) -> str:
    """The id the server gives the contact with `email` (the same each time)."""
    return f"c-{zlib.crc32(email.encode()):08x}"


def add_contact(
    email: Annotated[str, Field(description="The contact's email address.")],
    name: Annotated[str, Field(description="Their name.")] = "",
) -> dict[str, Any]:
    """Add a contact; answers the new contact with its id."""
    _log("add_contact", {"email": email, "name": name})
    return {"id": contact_id(email), "email": email}


def delete_contact(
    id: Annotated[str, Field(description="The contact's id, as add_contact gave it.")],
    email: Annotated[str, Field(description="The contact's email address, to be sure.")],
) -> str:
    """Delete a contact. Refuses an id that is not the one of `email`."""
    if id != contact_id(email):
        raise ToolError(f"no contact {id} with address {email}")
    _log("delete_contact", {"id": id, "email": email})
    return f"deleted {id}"


def contacts_server(log: Path) -> dict[str, Any]:
    """The "contacts" server as a skill's `mcp_servers` entry."""
    return {"command": "python", "args": [str(SCRIPT)], "env": {LOG_ENV: str(log)}}


def main() -> None:
    server = MCPServer("contacts", log_level="WARNING")
    server.add_tool(add_contact)
    server.add_tool(delete_contact)
    server.run()


if __name__ == "__main__":
    main()
