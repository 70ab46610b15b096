"""Warming up: what the first run would otherwise wait for, done while the server starts.

The MCP SDK's client, when a skill has MCP servers, is imported on a thread before the server
says it is ready (`load_libraries`): imported on the loop it would leave a server that has just
said so deaf for half a second, and imported on a thread later it could race a request's own
first import of the SDK. Once the server is ready, the model libraries the skills' routes need
import on a thread (`ModelRoute.prepare`) while every skill's MCP servers start as tasks, side
by side (a server's start mostly waits, an import works), so the event loop keeps answering
requests meanwhile and `/healthz` never waits for either.

Before all that, a process that boots starts the skills' stdio servers first (`launch`): a
server takes most of a second to start (an interpreter, then its SDK), on another core while
the process builds the rest, and the warm-up then finds it up.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from pathlib import Path

from pizzabot.agent.llm import ModelClient, ModelRouter, freeze_after_import
from pizzabot.agent.mcp_launch import import_client
from pizzabot.agent.skills import Skill, load_skills
from pizzabot.agent.tools_mcp import ToolHub

log = logging.getLogger(__name__)

__all__ = ["launch", "load_libraries", "warm", "warm_skill"]


async def load_libraries(skills: Iterable[Skill], *, tools: ToolHub) -> None:
    """Import the MCP SDK's client on a thread if a skill has MCP servers. Awaited while the
    server is built, when no request can reach code that imports the SDK on the loop."""
    if any(tools.servers(skill) for skill in skills):
        try:
            await asyncio.to_thread(import_client)
        except ImportError as exc:  # a broken install: the skills' first MCP calls say so again
            log.warning("the MCP SDK could not be imported: %s", exc)


async def warm(skills: Iterable[Skill], *, model: ModelClient | None, tools: ToolHub) -> None:
    """Load the libraries `skills` need and start their MCP servers."""
    skills = list(skills)

    async def servers() -> None:
        for skill in skills:
            await warm_skill(tools, skill)

    if isinstance(model, ModelRouter):
        await asyncio.gather(model.prepare(skills), servers())
    else:
        await servers()
    # What stays loaded now lives as long as the process: out of the collector's sight.
    freeze_after_import("warm-up")


async def warm_skill(tools: ToolHub, skill: Skill) -> None:
    """Start `skill`'s MCP servers; one that cannot start yet is said, and started again by
    the skill's first call."""
    try:
        await tools.warm(skill)
    except Exception as exc:
        log.warning("skill %s: MCP servers not ready yet: %s", skill.name, exc)


async def launch(folder: Path, tools: ToolHub) -> None:
    """Start the stdio MCP servers of the skills in `folder` before anything else is built
    (a process that has only just begun to boot): the files are read and the SDK's client
    imported on a thread, and each server starts in a task of `tools`. A refused file, or a
    server that cannot start, is said later by the process's own load or the skill's first use.
    """

    def read() -> list[Skill]:
        try:
            skills = list(load_skills(folder).skills.values())
        except Exception:  # the process's own load of the folder says what is wrong, and where
            return []
        if any(tools.servers(skill) for skill in skills):
            try:
                import_client()
            except ImportError:
                return []
        return skills

    for skill in await asyncio.to_thread(read):
        tools.launch(skill)
