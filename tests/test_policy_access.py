"""The access policy: who may decide, start and follow up through which channel, and how a
refusal reads in the audit trail. Skills are real `Skill`s in a `SkillBook` (reloaded in
place, as the server does); refusals are written to a real SQLite store and read back."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from agent.model import Box, Item, ItemKind, ItemStatus
from agent.policy import EMAIL, SLACK, Access, Act, audit_refusal
from agent.skills import Skill, SkillBook
from store.migrate import upgrade
from store.sql import SqlStore, connect

AT = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)


def skill(name: str = "sales", **over: Any) -> Skill:
    spec: dict[str, Any] = {
        "name": name,
        "instructions": "Help.",
        "model": "openai/none",
        "approvers": {"slack": ["U1"], "email": ["Ann@Example.test"]},
        "deliver": {"slack": "U7", "email": ["desk@example.test"]},
        "tools": {
            "crm.send_email": {
                "policy": "ask",
                "escalate_to": {"approvers": {"slack": ["U9"], "email": ["boss@example.test"]}},
            }
        },
    }
    spec.update(over)
    return Skill.model_validate(spec)


def item(tool: str | None = "crm.send_email", *, box: Box = Box.ACTION, **over: Any) -> Item:
    kind = ItemKind.RUN if box is Box.UNREAD else (ItemKind.TOOL if tool else ItemKind.BUDGET)
    fields: dict[str, Any] = {
        "id": "i1",
        "run_id": "r1",
        "skill": "sales",
        "box": box,
        "kind": kind,
        "status": ItemStatus.UNREAD if box is Box.UNREAD else ItemStatus.PENDING,
        "title": "t",
        "body": "",
        "created_at": AT,
        "tool": tool if box is Box.ACTION else None,
    }
    fields.update(over)
    return Item(**fields)


@pytest.fixture
def access() -> Access:
    return Access(skills=SkillBook({"sales": skill()}), email_senders=[" Eve@Example.test "])


def test_the_owners_channels_may_do_anything(access: Access) -> None:
    for channel in ("api", "web", "cli"):
        for verdict in (
            access.may_decide("owner", channel, item(skill="gone")),
            access.may_start("owner", channel),
            access.may_follow_up("owner", channel, "gone"),
        ):
            assert verdict and verdict.why == "the owner (holds the API token)"


def test_escalation_approvers_decide_that_tools_items_only(access: Access) -> None:
    assert access.may_decide("U1", SLACK, item())
    assert access.may_decide("U9", SLACK, item())  # the tool escalates to U9
    assert not access.may_decide("U9", SLACK, item("crm.lookup"))
    assert not access.may_decide("U9", SLACK, item(None))  # a budget item has no tool
    assert access.may_decide("boss@EXAMPLE.test", EMAIL, item())
    assert not access.may_decide("boss@example.test", EMAIL, item(None))
    # Identities of one channel mean nothing on another.
    assert not access.may_decide("U1", EMAIL, item())
    assert not access.may_decide("ann@example.test", SLACK, item())


def test_follow_ups_are_for_the_skills_approvers(access: Access) -> None:
    assert access.may_follow_up("U1", SLACK, "sales")
    assert access.may_follow_up(" ann@example.TEST", EMAIL, "sales")
    refused = access.may_follow_up("U9", SLACK, "sales")
    assert not refused
    assert (refused.act, refused.why) == (Act.FOLLOW_UP, "not an approver for this channel")
    assert not access.may_follow_up("U1", SLACK, "gone")


def test_who_may_start_runs_on_each_channel(access: Access) -> None:
    assert access.may_start("U1", SLACK, "sales")  # approves some skill on Slack
    assert not access.may_start("U7", SLACK)  # only delivered to
    assert access.may_start("eve@example.test", EMAIL)  # an allowed sender
    assert not access.may_start("ann@example.test", EMAIL)  # approving is not starting
    assert access.starters(EMAIL) == {"eve@example.test"}
    assert access.starters(SLACK) == {"U1"}
    refused = access.may_start("mallory@example.test", EMAIL)
    assert (bool(refused), refused.why) == (False, "may not start runs through this channel")


def test_lists_fail_closed() -> None:
    quiet = Access(skills=SkillBook({"sales": skill(approvers={}, tools={})}))
    assert not quiet.may_decide("U1", SLACK, item())
    assert not quiet.may_start("U1", SLACK) and quiet.starters(SLACK) == frozenset()
    assert not quiet.may_start("anyone@example.test", EMAIL)
    assert not quiet.may_decide("", SLACK, item()) and not quiet.knows("", EMAIL)
    gone = quiet.may_decide("U1", SLACK, item(skill="gone"))
    assert (bool(gone), gone.why) == (False, "the skill is not loaded")
    for channel in ("timer", "hook", "schedule"):
        assert not quiet.may_decide("U1", channel, item())


def test_a_reload_counts_at_once() -> None:
    book = SkillBook({"sales": skill()})
    access = Access(skills=book)
    assert access.may_decide("U1", SLACK, item())
    book.replace({"sales": skill(approvers={"slack": ["U2"]})})
    assert not access.may_decide("U1", SLACK, item()) and access.may_decide("U2", SLACK, item())
    assert access.starters(SLACK) == {"U2"}


def test_who_is_known_and_who_sees_a_note(access: Access) -> None:
    assert access.knows("ann@example.test", EMAIL) and access.knows("eve@example.test", EMAIL)
    assert not access.knows("mallory@example.test", EMAIL)
    note = item(box=Box.UNREAD)
    assert access.may_see("U1", SLACK, note) and access.may_see("U7", SLACK, note)
    assert access.may_see("desk@example.test", EMAIL, note)
    assert not access.may_see("U9", SLACK, note)
    assert access.may_see("U9", SLACK, item()) and not access.may_see("U7", SLACK, item())


async def test_a_refusal_is_audited_with_its_act_and_one_wording(
    access: Access, tmp_path: Path
) -> None:
    store = SqlStore(connect(f"sqlite+aiosqlite:///{tmp_path / 'audit.db'}"))
    await upgrade(store.engine)
    try:
        refused = access.may_decide("U5", SLACK, item())
        await audit_refusal(
            store, refused, now=AT, run_id="r1", item_id="i1", detail={"decision": "approve"}
        )
        await audit_refusal(store, access.may_start("U5", SLACK), now=AT)
        with pytest.raises(ValueError):
            await audit_refusal(store, access.may_start("U1", SLACK), now=AT)
        entries = list(reversed(await store.audit_log()))
    finally:
        await store.aclose()
    assert [(e.action, e.actor, e.channel, e.item_id, e.detail) for e in entries] == [
        (
            "decision_refused",
            "U5",
            "slack",
            "i1",
            {"decision": "approve", "why": "not an approver for this channel"},
        ),
        ("start_refused", "U5", "slack", None, {"why": "may not start runs through this channel"}),
    ]
