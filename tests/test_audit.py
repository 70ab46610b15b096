"""The audit trail: every decision with who, which channel, when, the arguments before and
after and the reason; every refused attempt and why. Each channel decides through
`Inbox.decide`, so the trail is the same whichever way a person answered."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pizzabot.agent.errors import NotAllowed
from pizzabot.agent.model import Approve, Box, Edit, ItemStatus, Reject
from pizzabot.agent.policy import Principal
from pizzabot.agent.testing.scripts import Reply, ToolCall, last_tool_result
from tests.peers.inproc import InProcess

MAIL = {"to": "ann@example.com", "subject": "s", "body": "b"}


def send_each_time(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Reply:
    if last_tool_result(messages) is None:
        return Reply(tool_calls=[ToolCall("crm__send_email", dict(MAIL))])
    return Reply(text="ok")


async def test_decisions_through_every_channel_and_refusals_are_audited(tmp_path: Path) -> None:
    skill = {"approvers": {"slack": ["U1"], "email": ["boss@example.com"]}}
    async with InProcess(tmp_path, send_each_time, skill=skill) as h:
        decisions = [
            ("api", "owner", Approve()),
            ("web", "owner", Edit({**MAIL, "copies": 2})),
            ("slack", "U1", Reject("not today")),
            ("email", "Boss@Example.com", Approve()),
        ]
        for channel, actor, decision in decisions:
            run = await h.runs.start("test", channel, by=Principal.owner("api"))
            await h.wait(run.id, {"waiting"})
            (item,) = await h.store.list_items(
                box=Box.ACTION, status=ItemStatus.PENDING, run_id=run.id
            )
            stranger = "U9" if channel != "email" else "eve@example.com"
            if channel in {"slack", "email"}:
                with pytest.raises(NotAllowed):
                    await h.inbox.decide(item.id, Approve(), by=Principal.of(channel, stranger))
            who = Principal.owner(channel) if actor == "owner" else Principal.of(channel, actor)
            await h.inbox.decide(item.id, decision, by=who)
            await h.wait(run.id, {"done"})
        trail = list(reversed(await h.store.audit_log()))
    made = [(e.channel, e.actor, e.detail["decision"]) for e in trail if e.action == "decision"]
    assert made == [
        ("api", "owner", "approve"),
        ("web", "owner", "edit"),
        ("slack", "U1", "reject"),
        ("email", "Boss@Example.com", "approve"),
    ]
    edit = next(e for e in trail if e.action == "decision" and e.channel == "web")
    assert edit.detail["args_before"] == MAIL and edit.detail["args_after"] == {**MAIL, "copies": 2}
    reject = next(e for e in trail if e.action == "decision" and e.channel == "slack")
    assert reject.detail["reason"] == "not today"
    refused = [
        (e.channel, e.actor, e.detail["why"]) for e in trail if e.action == "decision_refused"
    ]
    assert refused == [
        ("slack", "U9", "not an approver of this item"),
        ("email", "eve@example.com", "not an approver of this item"),
    ]
    assert all(e.at is not None for e in trail)
