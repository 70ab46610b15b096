"""A known history of cards, made by really running the engine (`InProcess`: the scripted
model server, the test MCP server over stdio, a SQL store) with a clock the story moves, so
every figure of the fatigue stats and every change of a policy replay is known exactly.

    async with InProcess(tmp_path, calls_in_input, skill=SKILL, db_url=url, clock=clock) as h:
        await make_history(h, clock)
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from pizzabot.agent.model import Approve, Box, Decision, Edit, Item, ItemStatus, Reject
from pizzabot.agent.policy import Principal
from pizzabot.agent.testing.scripts import Message, Reply, ToolCall, message_text
from tests.peers.inproc import InProcess
from tests.peers.triggers import FakeClock
from tests.waiting import eventually

START = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)
ANN = {"to": "ann@example.com", "subject": "hi", "body": "Hello"}
BOB = {"to": "bob@example.com", "subject": "yo", "body": "Hello"}
CAT = {"to": "cat@example.com", "subject": "x", "body": "Hello"}

#: The served skill's tools (the rest of the skill is `tests.peers.stack.default_skill`).
TOOLS: dict[str, Any] = {
    "crm.send_email": "ask",
    "crm.lookup": "auto",
    "crm.slow": "ask",
    "crm.fail": "deny",
}
SKILL: dict[str, Any] = {"tools": TOOLS, "approvers": {"slack": ["U1"]}}

OWNER = Principal.owner("api")
U1 = Principal.of("slack", "U1")


def calls_in_input(messages: list[Message], tools: list[dict[str, Any]]) -> Reply:
    """The model makes the input's calls (`[[wire name, args], …]`) one at a time."""
    wanted = json.loads(next(message_text(m) for m in messages if m["role"] == "user"))
    done = sum(1 for m in messages if m.get("role") == "tool")
    if done < len(wanted):
        name, args = wanted[done]
        return Reply(tool_calls=[ToolCall(name, args)])
    return Reply(text=f"made {done} calls")


async def _card(h: InProcess, run_id: str) -> Item:
    async def found() -> Item | None:
        items = await h.store.list_items(box=Box.ACTION, status=ItemStatus.PENDING, run_id=run_id)
        return items[0] if items else None

    return await eventually(found, what=f"a card of run {run_id}")


async def asked(
    h: InProcess,
    clock: FakeClock,
    tool: str,
    args: dict[str, Any],
    decision: Decision | None,
    by: Principal = OWNER,
    after: float = 0,
) -> str:
    """A run whose one call is asked about; `after` seconds later `by` decides (or nobody)."""
    run = await h.runs.start("test", json.dumps([[tool, args]]), by=OWNER)
    card = await _card(h, run.id)
    if decision is None:
        return run.id
    clock.advance(seconds=after)
    await h.inbox.decide(card.id, decision, by=by)
    await h.wait(run.id, {"done"})
    return run.id


async def unasked(h: InProcess, tool: str, args: dict[str, Any]) -> str:
    run = await h.runs.start("test", json.dumps([[tool, args]]), by=OWNER)
    await h.wait(run.id, {"done"})
    return run.id


async def make_history(h: InProcess, clock: FakeClock) -> None:
    """Two days of cards (the figures `tests/scenarios/test_stats.py` expects):

    2026-11-02 09:00  ann/hi approved by owner after 60 s; ann/hi approved by U1 after
                      120 s; a lookup (auto); a call of crm.fail (denied)
    2026-11-03 10:00  ann/hi approved by U1 after 300 s; bob/yo edited by owner after
                      600 s; bob/yo rejected by U1 after 30 s; cat/x left pending;
                      crm.slow approved by owner three times, 10 s each
    """
    clock.set(START)
    await asked(h, clock, "crm__send_email", ANN, Approve(), after=60)
    await asked(h, clock, "crm__send_email", ANN, Approve(), by=U1, after=120)
    await unasked(h, "crm__lookup", {"query": "ann"})
    await unasked(h, "crm__fail", {})
    clock.set(START.replace(day=3, hour=10))
    await asked(h, clock, "crm__send_email", ANN, Approve(), by=U1, after=300)
    await asked(h, clock, "crm__send_email", BOB, Edit({**BOB, "copies": 2}), after=600)
    await asked(h, clock, "crm__send_email", BOB, Reject("not bob"), by=U1, after=30)
    await asked(h, clock, "crm__send_email", CAT, None)
    for _ in range(3):
        await asked(h, clock, "crm__slow", {"seconds": 0}, Approve(), after=10)
