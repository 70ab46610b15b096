"""A skill's rules are checked against its tools' schemas when the tools are listed anew (the
skill's version first meets its servers, or a server lists again), not on every step of a
run: the real stdio test server lists the tools, and the check is counted."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from pizzabot.agent import tools_mcp
from pizzabot.agent.model import RunStatus
from pizzabot.agent.policy import Principal
from pizzabot.agent.skills import Skill, SkillFileError
from pizzabot.agent.testing.scripts import Reply, ToolCall, count_role
from pizzabot.agent.tools import ToolSpec, check_rules
from pizzabot.agent.tools_mcp import ToolHub
from tests.peers.inproc import InProcess
from tests.peers.stack import default_skill

#: The lookup tool with a rule on its one argument.
LOOKUP_RULES: dict[str, Any] = {
    "policy": "auto",
    "rules": [{"when": {"query": "nobody"}, "policy": "deny", "reason": "no one is nobody"}],
}


@pytest.fixture
def checks(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The skills whose rules the hub checks, one entry per check."""
    checked: list[str] = []

    def counting(skill: Skill, specs: Sequence[ToolSpec]) -> None:
        checked.append(skill.name)
        check_rules(skill, specs)

    monkeypatch.setattr(tools_mcp, "check_rules", counting)
    return checked


def three_lookups(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Reply:
    done = count_role(messages, "tool")
    if done < 3:
        return Reply(tool_calls=[ToolCall("crm__lookup", {"query": f"customer {done}"})])
    return Reply(text="looked up three")


async def test_the_rules_are_checked_once_across_the_steps_of_a_run(
    tmp_path: Path, checks: list[str]
) -> None:
    skill = {"tools": {"crm.lookup": LOOKUP_RULES}}
    async with InProcess(tmp_path, three_lookups, skill=skill) as h:
        run = await h.runs.start("test", "look up", by=Principal.owner("api"))
        done = await h.wait(run.id, {"done", "failed"})
    assert done.status is RunStatus.DONE, done.error
    assert done.usage.steps == 4  # the model, three times with a call to settle, then the answer
    assert checks == ["test"]


async def test_a_new_version_of_the_skill_or_a_new_listing_is_checked_again(
    tmp_path: Path, checks: list[str]
) -> None:
    spec = default_skill("http://127.0.0.1:1/v1", tools_log=tmp_path / "tools.jsonl")
    spec["tools"] = {"crm.lookup": LOOKUP_RULES}
    skill = Skill.model_validate(spec)
    hub = ToolHub(env={})
    try:
        for _ in range(3):
            await hub.list_tools(skill)
        assert checks == ["test"]
        reloaded = Skill.model_validate(spec)
        await hub.list_tools(reloaded)
        await hub.list_tools(reloaded)
        assert checks == ["test"] * 2
        await hub.aclose()  # the servers are started anew and list their tools again
        await hub.list_tools(reloaded)
        assert checks == ["test"] * 3
    finally:
        await hub.aclose()


async def test_a_rule_on_a_missing_argument_is_refused_at_every_listing(
    tmp_path: Path, checks: list[str]
) -> None:
    """A skill refused is not remembered as checked: every run of it fails the same way."""
    spec = default_skill("http://127.0.0.1:1/v1", tools_log=tmp_path / "tools.jsonl")
    spec["tools"] = {
        "crm.lookup": {"policy": "auto", "rules": [{"when": {"querry": "x"}, "policy": "deny"}]}
    }
    skill = Skill.model_validate(spec)
    hub = ToolHub(env={})
    try:
        for _ in range(2):
            with pytest.raises(SkillFileError, match=r"'querry' is not an argument of crm\.lookup"):
                await hub.list_tools(skill)
        assert checks == ["test"] * 2
    finally:
        await hub.aclose()
