"""Warming up: what the first run would otherwise wait for, done in the background at start.

The model libraries the skills' routes need import on a thread (`ModelRoute.prepare`) while
every skill's MCP servers start as tasks, side by side (a server's start mostly waits, an
import works), so the event loop keeps answering requests meanwhile and `/healthz` never
waits for either.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable

from pizzabot.agent.llm import ModelClient, ModelRouter, freeze_after_import
from pizzabot.agent.skills import Skill
from pizzabot.agent.tools_mcp import ToolHub

log = logging.getLogger(__name__)

__all__ = ["warm", "warm_skill"]


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
