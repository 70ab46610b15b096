"""How Pizza Bot introduces itself to the MCP servers it calls (`clientInfo`, in the
`initialize` handshake and in the 2026-07-28 protocol's per-request envelope): by its own
name and release, so a server's logs and its operator see who calls, not the SDK's default
name."""

from __future__ import annotations

import functools
import importlib.metadata
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the SDK takes seconds to import: load it on the first connection
    import mcp_types

__all__ = ["CLIENT_NAME", "client_info"]

#: The name every client gives the servers it meets (with the installed version).
CLIENT_NAME = "pizzabot"


@functools.cache
def client_info() -> mcp_types.Implementation:
    """This client's `clientInfo`: `CLIENT_NAME` and the installed release."""
    import mcp_types

    try:
        version = importlib.metadata.version(CLIENT_NAME)
    except importlib.metadata.PackageNotFoundError:  # run from a source tree, not installed
        version = "0+unknown"
    return mcp_types.Implementation(name=CLIENT_NAME, version=version)
