"""The skills' MCP servers: the hub a process runs them in, started first thing at boot.

A stdio MCP server takes most of a second to start (an interpreter, then its SDK), and
building the server takes a second or two. Started once the server is built, the first run
waited for both, one after the other. So `pizzabot serve` and `pizzabot worker` start the
servers before they build anything else (`start_first`): the skills folder is read and the MCP
SDK's client imported on a thread (the event loop keeps answering `/healthz`), then every stdio
server of a loaded skill starts in a task of its own, on another core while the rest is built.
The hub they run in is the one the process then runs with (`pizzabot.bot.server.build`'s
`tools`), so each server starts once.
"""

from __future__ import annotations

import asyncio

from pizzabot.agent.mcp_launch import import_client
from pizzabot.agent.mcp_oauth import McpAuth
from pizzabot.agent.skills import HttpServer, Skill, StdioServer, load_skills
from pizzabot.agent.tools_mcp import ToolHub
from pizzabot.bot.settings import Settings, environment

__all__ = ["folder_servers", "start_first", "tool_hub"]


def folder_servers(skill: Skill) -> dict[str, StdioServer | HttpServer]:
    """A skill with granted folders gets the built-in `files` server for exactly those."""
    if not skill.folders:
        return {}
    from pizzabot.tools.files import launch_args

    return {"files": StdioServer(command="python", args=launch_args(skill.folders))}


def tool_hub(settings: Settings, env: dict[str, str]) -> ToolHub:
    """The hub of a process's MCP servers. OAuth consents are kept in memory until the store
    is open; the server then keeps them in the database (a callback may reach any process)."""
    auth = McpAuth.serving(settings.data_dir, settings.base_url, env=env)
    return ToolHub(
        env=env, call_timeout=settings.tool_timeout, extra_servers=folder_servers, auth=auth
    )


def _prepare(settings: Settings) -> tuple[ToolHub, list[Skill]]:
    """What blocks (reading the skill files, importing the SDK), done on a thread. A refused
    file is said when the server loads the folder for itself."""
    hub = tool_hub(settings, environment())
    try:
        skills = list(load_skills(settings.skills_dir).skills.values())
    except Exception:  # the server's own load of the folder says what is wrong, and where
        return hub, []
    if any(hub.servers(skill) for skill in skills):
        try:
            import_client()
        except ImportError:  # a broken install: the skills' first calls say so
            return hub, []
    return hub, skills


async def start_first(settings: Settings) -> ToolHub:
    """A hub whose stdio servers are starting: the loaded skills' own and their folders'."""
    hub, skills = await asyncio.to_thread(_prepare, settings)
    for skill in skills:
        hub.launch(skill)
    return hub
