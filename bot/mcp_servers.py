"""The hub a process runs its skills' MCP servers in, made before anything else so that
`serve` and `worker` start the servers first (`agent.warmup.launch`) and run with them."""

from __future__ import annotations

from pizzabot.agent import warmup
from pizzabot.agent.mcp_oauth import McpAuth
from pizzabot.agent.skills import HttpServer, Skill, StdioServer
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
    """OAuth consents are kept in memory until the server hands it the database's."""
    auth = McpAuth.serving(settings.data_dir, settings.base_url, env=env)
    return ToolHub(
        env=env, call_timeout=settings.tool_timeout, extra_servers=folder_servers, auth=auth
    )


async def start_first(settings: Settings) -> ToolHub:
    """A hub whose skills' stdio servers are starting."""
    hub = tool_hub(settings, environment())
    await warmup.launch(settings.skills_dir, hub)
    return hub
