"""Groups, on-call hand-overs and the escalation ladder, with a clock the test moves.

In-process: SqlStore on SQLite, the scripted model server through litellm, a fake tool hub
and recording channels for Slack and email (see tests/peers/triggers.py). The served
stories, over the Slack recorder and the mail server, are in tests/e2e/test_groups_served.py.
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from pizzabot.agent.channel import RecordingChannel
from pizzabot.agent.errors import NotAllowed, OwnRequest
from pizzabot.agent.model import Approve, EventKind, ItemStatus, RunStatus
from pizzabot.agent.policy import Principal, Scope
from pizzabot.agent.policy.away import Away, AwayAccess
from pizzabot.agent.requests import NewRequest, Requests
from pizzabot.agent.skills import SkillBook, parse_skill
from pizzabot.agent.timers import Timers
from pizzabot.bot.core import build
from pizzabot.store.approvals import SqlApprovals
from pizzabot.store.migrate import upgrade
from pizzabot.store.sql import SqlStore, connect
from pizzabot.store.triggers import TriggerStore
from tests.conftest import fresh_pg_database
from tests.peers.triggers import FakeClock, Harness
from tests.scenarios.test_triggers_timers import MAIL, mail_then_report, started_and_waiting

PEOPLE = {
    "alice": {"slack": "U_ALICE", "email": "alice@example.com"},
    "bob": {"slack": "U_BOB", "email": "bob@example.com"},
    "carol": {"slack": "U_CAROL", "email": "carol@example.com"},
}


def ladder_skill() -> dict[str, Any]:
    return {
        "people": PEOPLE,
        "groups": {"sre": ["alice", "bob"], "leads": ["carol"]},
        "approvers": ["group:sre"],
        "tools": {
            "crm.send_email": {
                "policy": "ask",
                "escalate": [
                    {"after": "30m", "to": "group:leads"},
                    {"after": "2h", "then": "reject"},
                ],
            }
        },
    }


async def audit(h: Harness, action: str) -> list[dict[str, Any]]:
    entries = sorted(await h.store.audit_log(), key=lambda e: e.id)
    return [e.detail for e in entries if e.action == action]


async def test_any_one_of_a_group_decides(tmp_path: Path) -> None:
    async with Harness(tmp_path, mail_then_report, **ladder_skill()) as h:
        run_id, item_id = await started_and_waiting(h)
        with pytest.raises(NotAllowed):  # carol leads, and the ladder has not reached her
            await h.inbox.decide(item_id, Approve(), by=Principal.of("slack", "U_CAROL"))
        decided = await h.inbox.decide(item_id, Approve(), by=Principal.of("slack", "U_BOB"))
        assert decided.status is ItemStatus.APPROVED and decided.decided_by == "U_BOB"
        await h.drive()
        assert h.tools.calls == [("crm.send_email", MAIL)]
        assert (await h.store.get_run(run_id)).status is RunStatus.DONE


async def test_the_ladder_widens_to_a_group_who_may_then_decide(tmp_path: Path) -> None:
    async with Harness(tmp_path, mail_then_report, **ladder_skill()) as h:
        _, item_id = await started_and_waiting(h)
        card = await h.store.get_item(item_id)
        assert card.risk.ladder == "30m: sent to group:leads, who may decide · 2h: rejected"
        carol = Principal.of("email", "carol@example.com")
        with pytest.raises(NotAllowed):
            await h.inbox.decide(item_id, Approve(), by=carol)

        h.clock.advance(minutes=31)
        assert [a.kind for a in await h.timers.tick()] == ["escalated"]
        assert await h.timers.tick() == []  # once
        await h.outbox.drain()
        newest = [
            (d.channel, d.address) for _, d in h.slack.delivered[-1:] + h.email.delivered[-1:]
        ]
        assert newest == [("slack", "U_CAROL"), ("email", "carol@example.com")]
        [step] = await audit(h, "approval_escalated")
        assert step["step"] == "step1" and step["to"] == ["group:leads"]
        assert step["people"] == ["carol"] and step["after"] == "30m"
        card = await h.store.get_item(item_id)
        assert card.risk.steps == ("30m: sent to group:leads (carol)",)
        # The copies sent before are redrawn to show it.
        updated = {d.address for i, d in h.slack.updated if i.risk.steps}
        assert "C_TEAM" in updated

        decided = await h.inbox.decide(item_id, Approve(), by=carol)
        assert decided.status is ItemStatus.APPROVED


async def test_the_ladder_ends_in_an_honest_reject(tmp_path: Path) -> None:
    async with Harness(tmp_path, mail_then_report, **ladder_skill()) as h:
        run_id, item_id = await started_and_waiting(h)
        h.clock.advance(minutes=31)
        await h.timers.tick()
        h.clock.advance(hours=2)
        assert [a.kind for a in await h.timers.tick()] == ["expired"]
        item = await h.store.get_item(item_id)
        assert item.status is ItemStatus.EXPIRED and item.decided_by == "timeout"
        await h.drive()
        assert h.tools.calls == []
        said = next(m for m in h.model.requests[-1]["messages"] if m["role"] == "tool")["content"]
        assert "No one answered" in said and "within 2h" in said
        assert (await h.store.get_run(run_id)).status is RunStatus.DONE


def rota_skill() -> dict[str, Any]:
    # The test clock starts on Monday 2026-11-30 at 09:00 UTC; the rota hands over at 10:00.
    rota = {
        "people": ["alice", "bob"],
        "handover": {"weekday": "mon", "at": "10:00"},
        "timezone": "UTC",
        "starts": "2026-11-30",
    }
    return {
        "people": PEOPLE,
        "groups": {"oncall": {"rota": rota}},
        "approvers": ["group:oncall"],
        "tools": {"crm.send_email": {"policy": "ask"}},
    }


async def test_a_hand_over_sends_the_card_to_the_new_person(tmp_path: Path) -> None:
    async with Harness(tmp_path, mail_then_report, **rota_skill()) as h:
        run_id, item_id = await started_and_waiting(h)
        assert [a.kind for a in await h.timers.tick()] == ["on_call"]
        await h.outbox.drain()
        sent = [(d.channel, d.address) for _, d in h.slack.delivered + h.email.delivered]
        assert ("slack", "U_BOB") in sent and ("email", "bob@example.com") in sent
        assert ("slack", "U_ALICE") not in sent
        [first] = await audit(h, "approval_on_call")
        assert first["group"] == "oncall" and first["person"] == "bob"
        assert first["until"] == "2026-11-30T10:00:00+00:00"
        assert h.timers.next_due == 3600  # the loop wakes for the hand-over

        h.clock.advance(hours=1)
        assert [a.kind for a in await h.timers.tick()] == ["on_call"]
        assert await h.timers.tick() == []
        await h.outbox.drain()
        newest = [(d.channel, d.address) for _, d in h.slack.delivered + h.email.delivered]
        assert ("slack", "U_ALICE") in newest and ("email", "alice@example.com") in newest
        second = (await audit(h, "approval_on_call"))[-1]
        assert second["person"] == "alice" and second["since"] == "2026-11-30T10:00:00+00:00"
        notes = [e.data for e in await h.store.events(run_id) if e.kind is EventKind.NOTE]
        assert [n["on_call"]["approvers"]["people"] for n in notes] == [["bob"], ["alice"]]

        card = await h.store.get_item(item_id)
        assert card.risk.steps == ("on call in oncall: bob", "on call in oncall: alice")
        with pytest.raises(NotAllowed):  # bob's shift is over
            await h.inbox.decide(item_id, Approve(), by=Principal.of("slack", "U_BOB"))
        decided = await h.inbox.decide(item_id, Approve(), by=Principal.of("slack", "U_ALICE"))
        assert decided.decided_by == "U_ALICE"


FINANCE = """
name: payments
people:
  alice: {slack: U_ALICE}
  bob: {slack: U_BOB}
  carol: {slack: U_CAROL}
  dan: {email: dan@example.com}
groups: {finance: [bob, carol, dan]}
approvers: [alice, group:finance]
self_approval: false
tools:
  bank.transfer: {policy: ask, approvals: {required: 2, of: group:finance}}
"""


async def test_two_of_finance_not_the_requester(tmp_path: Path) -> None:
    engine = connect(f"sqlite+aiosqlite:///{tmp_path / 'db.sqlite'}")
    await upgrade(engine)
    store = SqlStore(engine)
    try:
        skills = SkillBook({"payments": parse_skill(FINANCE, "payments.yaml")})
        core = build(store=store, skills=skills, channels={}, mind=None)
        core.ctx.approvals = SqlApprovals(store.db)
        bobs_agent = Principal.token(token_id="t1", name="bob-bot", scope=Scope.ASK, person="bob")
        request, _ = await Requests(core.ctx).create(
            NewRequest(skill="payments", title="pay", tool="bank.transfer", args={"eur": 900}),
            by=bobs_agent,
        )
        decide, item_id = core.inbox.decide, request.item_id
        with pytest.raises(OwnRequest):  # bob is of finance, but he asked
            await decide(item_id, Approve(), by=Principal.of("slack", "U_BOB"))
        with pytest.raises(NotAllowed):  # alice approves the skill, not this tool
            await decide(item_id, Approve(), by=Principal.of("slack", "U_ALICE"))
        counted = await decide(item_id, Approve(), by=Principal.of("slack", "U_CAROL"))
        assert counted.status is ItemStatus.PENDING
        assert counted.risk.approvals_text == "1 of 2 approved: carol via Slack"
        done = await decide(item_id, Approve(), by=Principal.of("email", "dan@example.com"))
        assert done.status is ItemStatus.APPROVED
    finally:
        await store.aclose()


DEPLOYS = """
name: deploys
people:
  alice: {slack: U_ALICE}
  bob: {slack: U_BOB}
  carol: {slack: U_CAROL}
groups:
  leads: [carol]
  pager:
    rota:
      people: [alice, bob]
      handover: {weekday: mon, at: "10:00"}
      starts: 2026-11-30
approvers: [group:pager]
deliver: {slack: C_OPS}
tools:
  deploy.prod:
    policy: ask
    escalate: [{after: 30m, to: group:leads}, {after: 2h, then: halt}]
"""


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_steps_and_hand_overs_are_claimed_once_on_each_store(
    tmp_path: Path, backend: str
) -> None:
    async with contextlib.AsyncExitStack() as stack:
        if backend == "postgres":
            url = await stack.enter_async_context(fresh_pg_database())
        else:
            url = f"sqlite+aiosqlite:///{tmp_path / 'db.sqlite'}"
        engine = connect(url)
        await upgrade(engine)
        store = SqlStore(engine)
        stack.push_async_callback(store.aclose)
        clock = FakeClock()  # Monday 09:00 UTC: bob's turn, until 10:00
        skills = SkillBook({"deploys": parse_skill(DEPLOYS, "deploys.yaml")})
        slack = RecordingChannel(name="slack")
        core = build(store=store, skills=skills, channels={"slack": slack}, mind=None, clock=clock)
        timers = Timers(core.ctx, core.inbox, TriggerStore(store))
        request, _ = await Requests(core.ctx).create(
            NewRequest(skill="deploys", title="ship", tool="deploy.prod"),
            by=Principal.owner("api"),
        )
        both = await asyncio.gather(timers.tick(), timers.tick())
        assert sorted(a.kind for a in both[0] + both[1]) == ["on_call"]
        clock.advance(minutes=31)
        assert [a.kind for a in await timers.tick()] == ["escalated"]
        clock.advance(minutes=30)  # 10:01: alice's turn
        assert [a.kind for a in await timers.tick()] == ["on_call"]
        item = await store.get_item(request.item_id)
        assert item.risk.steps == (
            "on call in pager: bob",
            "30m: sent to group:leads (carol)",
            "on call in pager: alice",
        )
        trail = [e.action for e in sorted(await store.audit_log(), key=lambda e: e.id)]
        assert [a for a in trail if a.startswith("approval_")] == [
            "approval_on_call",
            "approval_escalated",
            "approval_on_call",
        ]
        clock.advance(hours=2)  # a request is never a halt: its end is a reject
        assert [a.kind for a in await timers.tick()] == ["expired"]


class _AwayBook:
    """Away states as the test sets them (the store's own book is tested in tests/contract)."""

    def __init__(self, *away: Away) -> None:
        self.away = list(away)

    async def current(self, now: datetime) -> list[Away]:
        return [a for a in self.away if a.holds(now)]


async def test_a_widening_to_someone_away_goes_to_their_delegate(tmp_path: Path) -> None:
    skill = ladder_skill()
    skill["people"] = {**PEOPLE, "dave": {"slack": "U_DAVE", "email": "dave@example.com"}}
    async with Harness(tmp_path, mail_then_report, **skill) as h:
        until = h.clock() + timedelta(days=7)
        away = Away("carol", "dave", until, set_by="owner", set_at=h.clock())
        h.ctx.access = AwayAccess(skills=h.ctx.skills, book=_AwayBook(away), clock=h.clock)
        _, item_id = await started_and_waiting(h)

        h.clock.advance(minutes=31)
        assert [a.kind for a in await h.timers.tick()] == ["escalated"]
        await h.outbox.drain()
        newest = [
            (d.channel, d.address) for _, d in h.slack.delivered[-1:] + h.email.delivered[-1:]
        ]
        # carol is away: the widening reaches dave, who decides in her place.
        assert newest == [("slack", "U_DAVE"), ("email", "dave@example.com")]
        [step] = await audit(h, "approval_escalated")
        assert step["people"] == ["carol"] and "slack:U_DAVE" in str(step["targets"])
        decided = await h.inbox.decide(item_id, Approve(), by=Principal.of("slack", "U_DAVE"))
        assert decided.status is ItemStatus.APPROVED and decided.decided_by == "dave for carol"
