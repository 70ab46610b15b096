"""Pizza Bot introduces itself to the MCP servers it calls by its own name and release, in
the `initialize` handshake and in the 2026-07-28 protocol's per-request envelope alike: the
real "ask" test server over stdio says what it was told."""

from __future__ import annotations

import json
from importlib.metadata import version
from pathlib import Path

import pytest

from pizzabot.agent.skills import Skill
from pizzabot.agent.tools_mcp import ToolHub
from tests.peers import mcp_elicit


@pytest.mark.parametrize("legacy", [True, False], ids=["initialize", "envelope"])
async def test_the_client_names_itself_pizzabot_with_its_version(
    tmp_path: Path, legacy: bool
) -> None:
    skill = Skill.model_validate(
        {
            "name": "asker",
            "instructions": "Ask.",
            "model": "openai/none",
            "mcp_servers": {"ask": mcp_elicit.server_entry(tmp_path / "log", legacy=legacy)},
            "tools": {"ask.hello": "auto"},
        }
    )
    hub = ToolHub(env={})
    try:
        outcome = await hub.call(skill, "ask", "hello", {})
    finally:
        await hub.aclose()
    told = json.loads(outcome.text)
    assert (told["name"], told["version"]) == ("pizzabot", version("pizzabot"))
    assert (told["protocol"] == "2025-11-25") is legacy
