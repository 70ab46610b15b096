"""Approval time-outs, reminders and escalation, with a clock the test moves (no waiting).

In-process: SqlStore on SQLite, the scripted model server through litellm, a fake tool hub
and recording channels for Slack and email (see tests/peers/triggers.py).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from pizzabot.agent.errors import NotAllowed
from pizzabot.agent.model import Approve, Box, EventKind, ItemStatus, RunStatus
from pizzabot.agent.policy import Principal
from pizzabot.agent.testing.scripts import Reply, ToolCall, last_tool_result
from pizzabot.agent.timers import Timers
from tests.peers.triggers import Harness

MAIL = {"to": "ann@example.com", "subject": "Quote"}


def mail_then_report(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Reply:
    result = last_tool_result(messages)
    if result is None:
        return Reply(text="I will mail Ann.", tool_calls=[ToolCall("crm__send_email", dict(MAIL))])
    return Reply(text=f"Done. The tool said: {result}")


def rule(**kw: Any) -> dict[str, Any]:
    return {"crm.send_email": {"policy": "ask", **kw}}


async def started_and_waiting(h: Harness) -> tuple[str, str]:
    run = await h.runs.start(
        "test", "mail Ann the quote", trigger="test", by=Principal.owner("api")
    )
    await h.drive()
    assert (await h.store.get_run(run.id)).status is RunStatus.WAITING
    item = await h.action_item(run.id)
    await h.outbox.drain()
    return run.id, item.id


async def test_reject_on_timeout_tells_the_model_no_one_answered(tmp_path: Path) -> None:
    async with Harness(tmp_path, mail_then_report, tools=rule(timeout="1h")) as h:
        run_id, item_id = await started_and_waiting(h)
        assert len(h.slack.delivered) == 1 and len(h.email.delivered) == 1

        h.clock.advance(minutes=59)
        assert await h.timers.tick() == []
        assert (await h.store.get_item(item_id)).status is ItemStatus.PENDING

        h.clock.advance(minutes=2)
        actions = await h.timers.tick()
        assert [(a.item_id, a.kind) for a in actions] == [(item_id, "expired")]
        item = await h.store.get_item(item_id)
        assert item.status is ItemStatus.EXPIRED and item.decided_by == "timeout"
        # Every channel's copy is updated to show it expired.
        await h.outbox.drain()
        updated = {(d.channel, i.status) for i, d in h.slack.updated + h.email.updated}
        assert updated == {("slack", ItemStatus.EXPIRED), ("email", ItemStatus.EXPIRED)}

        await h.drive()
        run = await h.store.get_run(run_id)
        assert run.status is RunStatus.DONE
        assert h.tools.calls == []  # nothing ran
        tool_msgs = [m for m in h.model.requests[-1]["messages"] if m["role"] == "tool"]
        assert len(tool_msgs) == 1
        said = tool_msgs[0]["content"]
        assert "No one answered" in said and "within 1h" in said
        assert "do not retry it and do not try to reach the same result another way" in said
        assert run.result is not None and "No one answered" in run.result
        # A second pass does nothing more.
        assert await h.timers.tick() == []


async def test_halt_on_timeout_ends_the_run_with_an_unread_item(tmp_path: Path) -> None:
    async with Harness(
        tmp_path, mail_then_report, tools=rule(timeout="30m", on_timeout="halt")
    ) as h:
        run_id, item_id = await started_and_waiting(h)
        calls_before = len(h.model.requests)
        h.clock.advance(minutes=31)
        assert [a.kind for a in await h.timers.tick()] == ["halted"]
        await h.drive()

        run = await h.store.get_run(run_id)
        assert run.status is RunStatus.CANCELLED
        assert run.error is not None and "run was stopped (on_timeout: halt)" in run.error
        assert len(h.model.requests) == calls_before  # the model was not asked again
        assert h.tools.calls == []
        assert (await h.store.get_item(item_id)).status is ItemStatus.EXPIRED
        unread = await h.store.list_items(box=Box.UNREAD, run_id=run_id)
        assert len(unread) == 1
        assert "No one answered" in unread[0].body and "within 30m" in unread[0].body
        events = await h.store.events(run_id)
        decision = next(e for e in events if e.kind is EventKind.DECISION)
        assert decision.data["decision"] == "expired" and decision.data["halt"] is True
        assert events[-1].kind is EventKind.RUN_FINISHED

        # The halted run can still be continued: its conversation is whole.
        await h.runs.follow_up(run_id, "Go on without the email.", by=Principal.owner("api"))
        await h.drive()
        assert (await h.store.get_run(run_id)).status is RunStatus.DONE
        roles = [m["role"] for m in h.model.requests[-1]["messages"]]
        assert roles == ["system", "user", "assistant", "tool", "user"]


async def test_reminder_and_escalation_are_delivered_once(tmp_path: Path) -> None:
    escalate_to = {
        "slack": "U_BOSS",
        "email": ["boss@example.com"],
        "approvers": {"slack": ["U_BOSS"], "email": ["boss@example.com"]},
    }
    tools = rule(remind_after="2h", escalate_after="8h", escalate_to=escalate_to)
    async with Harness(tmp_path, mail_then_report, tools=tools) as h:
        run_id, item_id = await started_and_waiting(h)
        first = [(d.channel, d.address) for _, d in h.slack.delivered + h.email.delivered]
        assert first == [("slack", "C_TEAM"), ("email", "ann@example.com")]

        h.clock.advance(hours=1)
        assert await h.timers.tick() == []
        h.clock.advance(hours=1)
        assert [a.kind for a in await h.timers.tick()] == ["reminded"]
        assert await h.timers.tick() == []  # once
        await h.outbox.drain()
        sent = [(d.channel, d.address) for _, d in h.slack.delivered + h.email.delivered]
        assert sorted(sent) == sorted([*first, *first])  # the same people, again
        assert all(i.id == item_id for i, _ in h.slack.delivered + h.email.delivered)

        h.clock.advance(hours=6)
        assert [a.kind for a in await h.timers.tick()] == ["escalated"]
        assert await h.timers.tick() == []
        await h.outbox.drain()
        newest = [
            (d.channel, d.address) for _, d in h.slack.delivered[-1:] + h.email.delivered[-1:]
        ]
        assert newest == [("slack", "U_BOSS"), ("email", "boss@example.com")]

        notes = [e.data for e in await h.store.events(run_id) if e.kind is EventKind.NOTE]
        assert notes[0]["reminder"]["item_id"] == item_id
        assert notes[0]["reminder"]["targets"] == ["slack:C_TEAM", "email:ann@example.com"]
        assert notes[1]["escalated"]["targets"] == ["slack:U_BOSS", "email:boss@example.com"]
        assert len(notes) == 2

        # The people it escalated to may decide it; others still may not.
        with pytest.raises(NotAllowed):
            await h.inbox.decide(item_id, Approve(), by=Principal.of("email", "eve@example.com"))
        decided = await h.inbox.decide(
            item_id, Approve(), by=Principal.of("email", "Boss@Example.com")
        )
        assert decided.status is ItemStatus.APPROVED
        await h.drive()
        assert h.tools.calls == [("crm.send_email", MAIL)]
        # Every copy (first, reminder, escalation) is updated with the outcome (before it,
        # the copies sent earlier were redrawn to show each step).
        await h.outbox.drain()
        outcomes = [i for i, _ in h.slack.updated + h.email.updated if i.decided]
        assert len(outcomes) == 6
        steps = next(i for i, _ in h.slack.updated if i.decided).risk.steps
        assert steps == ("2h: reminder", "8h: sent to escalate_to")


async def test_a_decided_item_is_neither_expired_nor_reminded(tmp_path: Path) -> None:
    async with Harness(
        tmp_path, mail_then_report, tools=rule(timeout="1h", remind_after="10m")
    ) as h:
        run_id, item_id = await started_and_waiting(h)
        await h.inbox.decide(item_id, Approve(), by=Principal.of("slack", "U_ANN"))
        h.clock.advance(hours=2)
        assert await h.timers.tick() == []
        await h.drive()
        assert (await h.store.get_run(run_id)).status is RunStatus.DONE
        assert (await h.store.get_item(item_id)).status is ItemStatus.APPROVED


async def test_two_timer_loops_remind_once_between_them(tmp_path: Path) -> None:
    async with Harness(tmp_path, mail_then_report, tools=rule(remind_after="5m")) as h:
        _, item_id = await started_and_waiting(h)
        other = Timers(h.ctx, h.inbox, h.triggers)
        h.clock.advance(minutes=6)
        a, b = await asyncio.gather(h.timers.tick(), other.tick())
        assert len(a) + len(b) == 1
        deliveries = await h.store.deliveries(item_id)
        assert len(deliveries) == 4  # two first copies, two reminders


async def test_items_without_timer_rules_are_left_alone(tmp_path: Path) -> None:
    async with Harness(tmp_path, mail_then_report) as h:
        _, item_id = await started_and_waiting(h)
        h.clock.advance(days=30)
        assert await h.timers.tick() == []
        assert (await h.store.get_item(item_id)).status is ItemStatus.PENDING


async def test_a_wake_for_a_new_item_keeps_every_older_items_moment(tmp_path: Path) -> None:
    """A new item wakes the loop for itself alone; an older item's reminder still comes on
    time, and the new item's time-out too, however often the loop is woken."""
    async with Harness(
        tmp_path, mail_then_report, tools=rule(remind_after="1h", timeout="90m")
    ) as h:
        _, old = await started_and_waiting(h)
        assert await h.timers.tick() == [] and h.timers.next_due == 3600

        h.clock.advance(minutes=40)
        _, new = await started_and_waiting(h)  # its own reminder is due an hour from now
        assert await h.timers.tick(new_only=True) == []
        assert h.timers.next_due == 20 * 60  # the older item's reminder, still 20 min away

        h.clock.advance(minutes=20)
        # Woken again by something new: the older item's moment has come, so it is acted on.
        actions = await h.timers.tick(new_only=True)
        assert [(a.item_id, a.kind) for a in actions] == [(old, "reminded")]
        assert h.timers.next_due == 30 * 60  # the older item's time-out

        h.clock.advance(minutes=30)
        actions = await h.timers.tick(new_only=True)
        assert [(a.item_id, a.kind) for a in actions] == [(old, "expired")]
        assert (await h.store.get_item(new)).status is ItemStatus.PENDING
        assert h.timers.next_due == 10 * 60  # the newer item's reminder
