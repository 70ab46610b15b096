"""Starting a skill's stdio MCP server with the environment it is meant to have, and nothing more.

A stdio server is a child process, and a child inherits its parent's environment: here that
would hand every MCP server the Slack token, the mail passwords and the model key. So a
child's environment is built from nothing (`child_environment`), and what the MCP SDK adds on
its own is taken away again at launch (`launch`).
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Mapping

from pizzabot.agent.skills import StdioServer

__all__ = ["BASE_ENV", "child_environment", "import_client", "launch"]

#: What every stdio server gets from the server's environment, whatever its skill says.
BASE_ENV = ("PATH", "HOME", "LANG")


def child_environment(cfg: StdioServer, parent: Mapping[str, str]) -> dict[str, str]:
    """The whole environment of a stdio server started from a process whose environment is
    `parent`: `BASE_ENV`, the names in `pass_env`, then `env`; or all of `parent` under `env`
    when the skill says `inherit_env: true`."""
    if cfg.inherit_env:
        env = dict(parent)
    else:
        env = {k: parent[k] for k in (*BASE_ENV, *cfg.pass_env) if k in parent}
    env.update(cfg.env)
    return env


def launch(command: str, args: list[str], env: dict[str, str]) -> tuple[str, list[str]]:
    """The command line that runs `command` with exactly `env`.

    The SDK merges its own pick of the parent's variables (`USER`, `SHELL`, ...) under the
    `env` it is given; `env -u` unsets the ones this child was not meant to have before the
    server starts (it execs, so the server keeps the process the SDK watches).
    """
    from mcp.client.stdio import DEFAULT_INHERITED_ENV_VARS

    extra = sorted(set(DEFAULT_INHERITED_ENV_VARS) - set(env))
    # A command that cannot be found is left to the SDK, which says so plainly.
    found = command if "/" in command else shutil.which(command, path=env.get("PATH", os.defpath))
    if not extra or sys.platform == "win32" or _ENV_COMMAND is None or found is None:
        return command, args
    unset = [arg for name in extra for arg in ("-u", name)]
    return _ENV_COMMAND, [*unset, "--", found, *args]


# Looked up in the system's default path, not the server's PATH.
_ENV_COMMAND = shutil.which("env", path=os.defpath)


def import_client() -> None:
    """Import the MCP SDK's client, as a first connection would. The import takes ~0.5 s of
    a core, so a server does it on a thread while it starts (`agent.warmup.load_libraries`).

    The order is always the same, client first: `mcp.client` imports `mcp.server`, and two
    threads entering that cycle from opposite ends would each be handed the other's partly
    initialized module."""
    import mcp.client
    import mcp.client.session
    import mcp.client.stdio
    import mcp.client.streamable_http  # noqa: F401
