"""One verdict for every call: the engine's own calls and requests from outside agents reach
the same answer for the same skill rules, grants and hints (`pizzabot.agent.policy.call_verdict`).

Each case files the same call both ways against one store: as a model's call in a run of a
skill with a model (`pizzabot.agent.settle.plan`, what the engine carries out) and as a
request to an inbox-only skill with the same `tools:` entries (`Requests.create`, a real
SQLite store and its grants). The outcome and the card a person would see must agree.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from pizzabot.agent.conversation import CallState
from pizzabot.agent.model import ItemStatus, Risk
from pizzabot.agent.policy.grants import make_grant
from pizzabot.agent.policy.principal import Principal
from pizzabot.agent.policy.rules import ToolHints
from pizzabot.agent.requests import NewRequest, Requests
from pizzabot.agent.settle import AskPerson, Execute, Granted, Plan, TellModel, plan
from pizzabot.agent.skills import Skill, SkillBook
from pizzabot.agent.tools import ToolSpec
from pizzabot.bot.core import build
from pizzabot.store.grants import SqlGrants
from pizzabot.store.migrate import upgrade
from pizzabot.store.sql import SqlStore, connect

NOW = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
TOOLS: dict[str, Any] = {
    "crm.refund": {
        "policy": "ask",
        "grants": ["run", "1h", "exact"],
        "rules": [
            {"when": {"amount": {"gt": 1000}}, "policy": "deny", "reason": "over the limit"},
            {"when": {"amount": {"lt": 10}}, "policy": "auto"},
        ],
        "impact": "high",
        "reversible": False,
    },
    "crm.lookup": {"policy": "auto"},
    "crm.wipe": {"policy": "deny"},
}
SCHEMA = {"type": "object", "properties": {"amount": {"type": "number"}}}


@dataclass
class Both:
    engine_skill: Skill
    inbox_skill: Skill
    requests: Requests
    grants: SqlGrants


def _skill(name: str, **more: Any) -> Skill:
    spec: dict[str, Any] = {"name": name, "tools": TOOLS, "defaults": {"read_only": "auto"}}
    return Skill.model_validate({**spec, **more})


@pytest.fixture
async def both(tmp_path: Path) -> AsyncIterator[Both]:
    engine_skill = _skill("runner", model="openai/none", instructions="Refund what is owed.")
    inbox_skill = _skill("asker")
    db = connect(f"sqlite+aiosqlite:///{tmp_path / 'verdict.db'}")
    await upgrade(db)
    store = SqlStore(db)
    grants = SqlGrants(store.db)
    core = build(
        store=store,
        skills=SkillBook({s.name: s for s in (engine_skill, inbox_skill)}),
        channels={},
        mind=None,
        clock=lambda: NOW,
        grants=grants,
    )
    yield Both(engine_skill, inbox_skill, Requests(core.ctx), grants)
    await store.aclose()


async def _engine(both: Both, tool: str, args: dict[str, Any], hints: ToolHints | None) -> Plan:
    """What the engine does with a model's call in run `run-a`."""
    server, name = tool.split(".")
    spec = ToolSpec(server, name, "", SCHEMA, hints)
    call = CallState(id="c1", wire_name=spec.wire_name, args=args)
    found = await both.grants.for_call(skill="runner", tool=tool, run_id="run-a", now=NOW)
    return plan(call, both.engine_skill, spec, Granted(found, "run-a", NOW))


async def _request(both: Both, tool: str, args: dict[str, Any]) -> tuple[str, Risk]:
    new = NewRequest(skill="asker", title="t", tool=tool, args=args, schema=SCHEMA)
    state, _ = await both.requests.create(new, by=Principal.owner("api"))
    item = await both.requests.ctx.store.get_item(state.item_id)
    return state.status, item.risk


def _outcome(step: Plan) -> str:
    match step:
        case Execute(grant=None):
            return "approved"
        case Execute():
            return "approved by grant"
        case TellModel(denied_by=str()):
            return "rejected"
        case AskPerson():
            return "pending"
    raise AssertionError(step)


async def _grant(both: Both, choice: str, *, skill: str, args: dict[str, Any]) -> None:
    await both.grants.add(
        make_grant(
            choice,
            id=f"g-{skill}-{choice}",
            skill=skill,
            tool="crm.refund",
            args=args,
            run_id="run-a",
            item_id=f"i-{skill}-{choice}",  # one grant per decided item
            granted_by="alice",
            granted_via="slack",
            now=NOW - timedelta(minutes=1),
        )
    )


@pytest.mark.parametrize(
    ("tool", "args", "outcome"),
    [
        ("crm.refund", {"amount": 5000}, "rejected"),  # a deny rule
        ("crm.refund", {"amount": 5}, "approved"),  # an auto rule
        ("crm.refund", {"amount": 50}, "pending"),  # the tool's policy asks
        ("crm.lookup", {}, "approved"),
        ("crm.wipe", {}, "rejected"),
        ("crm.unlisted", {}, "pending"),  # no hints: asked
    ],
)
async def test_rules_count_the_same_for_a_run_and_a_request(
    both: Both, tool: str, args: dict[str, Any], outcome: str
) -> None:
    step = await _engine(both, tool, args, hints=None)
    status, risk = await _request(both, tool, args)
    assert _outcome(step) == outcome
    assert status == outcome
    if isinstance(step, AskPerson):
        # The same card, but for the grant of a run: a request's run has no second call.
        assert risk == Risk(
            **{**step.risk.__dict__, "grants": tuple(g for g in step.risk.grants if g != "run")}
        )


async def test_grants_count_the_same_for_a_run_and_a_request(both: Both) -> None:
    args = {"amount": 50}
    # A grant for the rest of run `run-a` covers the engine's next call there, and nothing
    # else: not a request, whose run is a run of its own.
    await _grant(both, "run", skill="runner", args=args)
    await _grant(both, "run", skill="asker", args=args)
    assert _outcome(await _engine(both, "crm.refund", args, None)) == "approved by grant"
    assert (await _request(both, "crm.refund", args))[0] == "pending"

    # An exact grant covers the same arguments on both paths, and only those.
    await _grant(both, "exact", skill="asker", args=args)
    status, _ = await _request(both, "crm.refund", args)
    assert status == "approved"
    assert (await _request(both, "crm.refund", {"amount": 60}))[0] == "pending"
    await _grant(both, "exact", skill="runner", args={"amount": 60})
    assert _outcome(await _engine(both, "crm.refund", {"amount": 60}, None)) == (
        "approved by grant"
    )

    # An hour's grant covers any arguments the rules ask about, on both; never a deny.
    await _grant(both, "1h", skill="asker", args=args)
    assert (await _request(both, "crm.refund", {"amount": 70}))[0] == "approved"
    assert (await _request(both, "crm.refund", {"amount": 5000}))[0] == "rejected"


async def test_tool_hints_count_the_same_where_they_are_known(both: Both) -> None:
    harmless = ToolHints(read_only=True)
    destructive = ToolHints(read_only=False, destructive=True)
    # Hints never loosen or tighten a tool the skill lists, on either path.
    assert _outcome(await _engine(both, "crm.lookup", {}, destructive)) == "approved"
    assert _outcome(await _engine(both, "crm.refund", {"amount": 50}, harmless)) == "pending"
    # An unlisted tool the server calls read-only runs unasked (`defaults.read_only`) ...
    assert _outcome(await _engine(both, "crm.unlisted", {}, harmless)) == "approved"
    # ... but a requester's word is not a tool server's: a request carries no hints, so the
    # same unlisted tool is asked about, as the engine asks about a tool with no hints.
    assert _outcome(await _engine(both, "crm.unlisted", {}, None)) == "pending"
    status, _ = await _request(both, "crm.unlisted", {})
    assert status == "pending"


async def test_a_requesters_risk_notes_never_hide_the_skills(both: Both) -> None:
    claimed = Risk(impact="low", reversible=True)
    new = NewRequest(skill="asker", title="t", tool="crm.refund", args={"amount": 50}, risk=claimed)
    state, _ = await both.requests.create(new, by=Principal.owner("api"))
    item = await both.requests.ctx.store.get_item(state.item_id)
    assert (item.risk.impact, item.risk.reversible) == ("high", False)
    # Where the skill says nothing of a tool, the card shows what the requester says.
    new = NewRequest(skill="asker", title="t", tool="crm.unlisted", args={}, risk=claimed)
    state, _ = await both.requests.create(new, by=Principal.owner("api"))
    item = await both.requests.ctx.store.get_item(state.item_id)
    assert (item.risk.impact, item.risk.reversible) == ("low", True)
    assert item.status is ItemStatus.PENDING
