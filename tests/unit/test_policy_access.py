"""The access policy: who may decide, start and follow up through which channel, and how a
refusal reads in the audit trail. Skills are real `Skill`s in a `SkillBook` (reloaded in
place, as the server does); refusals are written to a real SQLite store and read back."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from pizzabot.agent.model import Box, Item, ItemKind, ItemStatus
from pizzabot.agent.policy import EMAIL, SLACK, Access, Act, Principal, Scope, audit_refusal
from pizzabot.agent.policy.quorum import person_of
from pizzabot.agent.skills import Skill, SkillBook
from pizzabot.store.migrate import upgrade
from pizzabot.store.sql import SqlStore, connect

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


def P(channel: str, identity: str) -> Principal:
    return Principal.of(channel, identity)


def test_the_owner_may_do_anything_on_any_channel(access: Access) -> None:
    for channel in ("api", "web", "cli", "mcp"):
        owner = Principal.owner(channel)
        for verdict in (
            access.may_decide(owner, item(skill="gone")),
            access.may_start(owner),
            access.may_follow_up(owner, "gone"),
            access.may_manage_tokens(owner),
            access.may_control(owner),
        ):
            assert verdict and verdict.why == "an admin (the owner, or a token with scope admin)"


def test_escalation_approvers_decide_that_tools_items_only(access: Access) -> None:
    assert access.may_decide(P(SLACK, "U1"), item())
    assert access.may_decide(P(SLACK, "U9"), item())  # the tool escalates to U9
    assert not access.may_decide(P(SLACK, "U9"), item("crm.lookup"))
    assert not access.may_decide(P(SLACK, "U9"), item(None))  # a budget item has no tool
    assert access.may_decide(P(EMAIL, "boss@EXAMPLE.test"), item())
    assert not access.may_decide(P(EMAIL, "boss@example.test"), item(None))
    # Identities of one channel mean nothing on another.
    assert not access.may_decide(P(EMAIL, "U1"), item())
    assert not access.may_decide(P(SLACK, "ann@example.test"), item())


def test_follow_ups_are_for_the_skills_approvers(access: Access) -> None:
    assert access.may_follow_up(P(SLACK, "U1"), "sales")
    assert access.may_follow_up(P(EMAIL, " ann@example.TEST"), "sales")
    refused = access.may_follow_up(P(SLACK, "U9"), "sales")
    assert not refused
    assert (refused.act, refused.why) == (Act.FOLLOW_UP, "not an approver of this item")
    assert not access.may_follow_up(P(SLACK, "U1"), "gone")


def test_who_may_start_runs_on_each_channel(access: Access) -> None:
    assert access.may_start(P(SLACK, "U1"), "sales")  # approves some skill on Slack
    assert not access.may_start(P(SLACK, "U7"))  # only delivered to
    assert access.may_start(P(EMAIL, "eve@example.test"))  # an allowed sender
    assert not access.may_start(P(EMAIL, "ann@example.test"))  # approving is not starting
    assert access.starters(EMAIL) == {"eve@example.test"}
    assert access.starters(SLACK) == {"U1"}
    refused = access.may_start(P(EMAIL, "mallory@example.test"))
    assert (bool(refused), refused.why) == (False, "may not start runs through this channel")
    # A trigger starts what it was set up to start, and decides nothing.
    hook = Principal.system("hook", "hook:deploys")
    assert access.may_start(hook, "sales") and not access.may_decide(hook, item())


def test_lists_fail_closed() -> None:
    quiet = Access(skills=SkillBook({"sales": skill(approvers={}, tools={})}))
    assert not quiet.may_decide(P(SLACK, "U1"), item())
    assert not quiet.may_start(P(SLACK, "U1")) and quiet.starters(SLACK) == frozenset()
    assert not quiet.may_start(P(EMAIL, "anyone@example.test"))
    assert not quiet.may_decide(P(SLACK, ""), item()) and not quiet.knows(P(EMAIL, ""))
    gone = quiet.may_decide(P(SLACK, "U1"), item(skill="gone"))
    assert (bool(gone), gone.why) == (False, "the skill is not loaded")
    for channel in ("timer", "hook", "schedule"):
        assert not quiet.may_decide(P(channel, "U1"), item())


def test_a_reload_counts_at_once() -> None:
    book = SkillBook({"sales": skill()})
    access = Access(skills=book)
    assert access.may_decide(P(SLACK, "U1"), item())
    book.replace({"sales": skill(approvers={"slack": ["U2"]})})
    assert not access.may_decide(P(SLACK, "U1"), item())
    assert access.may_decide(P(SLACK, "U2"), item())
    assert access.starters(SLACK) == {"U2"}


def test_who_is_known_and_who_sees_a_note(access: Access) -> None:
    assert access.knows(P(EMAIL, "ann@example.test")) and access.knows(P(EMAIL, "eve@example.test"))
    assert not access.knows(P(EMAIL, "mallory@example.test"))
    note = item(box=Box.UNREAD)
    assert access.may_see(P(SLACK, "U1"), note) and access.may_see(P(SLACK, "U7"), note)
    assert access.may_see(P(EMAIL, "desk@example.test"), note)
    assert not access.may_see(P(SLACK, "U9"), note)
    assert access.may_see(P(SLACK, "U9"), item()) and not access.may_see(P(SLACK, "U7"), item())


def token(scope: Scope, person: str | None = None) -> Principal:
    return Principal.token(token_id="t1", name="agent", scope=scope, person=person)


def test_an_ask_token_decides_starts_and_revokes_nothing(access: Access) -> None:
    asker = token(Scope.ASK, person="ann")
    for verdict in (
        access.may_decide(asker, item()),
        access.may_start(asker, "sales"),
        access.may_follow_up(asker, "sales"),
        access.may_revoke(asker, "sales", "crm.send_email"),
        access.may_manage_tokens(asker),
        access.may_control(asker),
    ):
        assert not verdict
    assert "ask may only file requests" in access.may_decide(asker, item()).why


def test_a_decide_token_decides_as_its_person_through_every_identity() -> None:
    people = {"ann": {"slack": "U1", "email": "ann@example.test"}, "bob": {"slack": "U2"}}
    book = SkillBook(
        {
            "sales": skill(people=people, approvers={"email": ["ann@example.test"]}),
            "ops": skill("ops", people=people, approvers=["bob"]),
        }
    )
    access = Access(skills=book)
    ann, bob = token(Scope.DECIDE, "ann"), token(Scope.DECIDE, "bob")
    assert access.may_decide(ann, item())  # ann approves sales by her address
    assert not access.may_decide(bob, item())
    assert access.may_decide(bob, item(skill="ops"))  # bob approves ops by name
    assert access.may_start(ann, "sales") and not access.may_start(ann, "ops")
    # A decide token without a person, or naming nobody in the skill, decides nothing.
    assert not access.may_decide(token(Scope.DECIDE), item())
    assert not access.may_decide(token(Scope.DECIDE, "carol"), item())
    # Tokens and the kill switch stay an admin's.
    assert not access.may_manage_tokens(ann) and not access.may_control(ann)
    assert access.may_control(token(Scope.ADMIN))


def test_a_person_signed_in_by_a_mailed_link_counts_by_that_address() -> None:
    people = {"ann": {"slack": "U1", "email": "ann@example.test"}, "bob": {"slack": "U2"}}
    book = SkillBook(
        {
            "sales": skill(people=people, approvers=["ann"]),
            "ops": skill("ops", people=people, approvers=["bob"]),
        }
    )
    access = Access(skills=book, email_senders=["ann@example.test"])
    ann = Principal.by_mail("ann@example.test")
    assert (ann.channel, ann.namespace, ann.actor) == ("web", EMAIL, "ann@example.test")
    assert access.may_decide(ann, item()) and not access.may_decide(ann, item(skill="ops"))
    assert access.may_follow_up(ann, "sales") and access.may_start(ann)
    assert access.may_see(ann, item()) and not access.may_see(ann, item(skill="ops"))
    # Ann by mail link and Ann on Slack are one person to a count of approvals.
    assert person_of(book.get("sales"), ann) == person_of(book.get("sales"), P(SLACK, "U1"))
    assert person_of(book.get("sales"), ann) == "ann"
    # Not an admin, and an address no list names decides nothing.
    assert not access.may_control(ann) and not access.may_manage_tokens(ann)
    assert not access.may_decide(Principal.by_mail("mallory@example.test"), item())


async def test_a_refusal_is_audited_with_its_act_and_one_wording(
    access: Access, tmp_path: Path
) -> None:
    store = SqlStore(connect(f"sqlite+aiosqlite:///{tmp_path / 'audit.db'}"))
    await upgrade(store.engine)
    try:
        refused = access.may_decide(P(SLACK, "U5"), item())
        await audit_refusal(
            store, refused, now=AT, run_id="r1", item_id="i1", detail={"decision": "approve"}
        )
        await audit_refusal(store, access.may_start(P(SLACK, "U5")), now=AT)
        with pytest.raises(ValueError):
            await audit_refusal(store, access.may_start(P(SLACK, "U1")), now=AT)
        await audit_refusal(store, access.may_decide(token(Scope.ASK), item()), now=AT)
        entries = list(reversed(await store.audit_log()))
    finally:
        await store.aclose()
    assert [(e.action, e.actor, e.channel, e.item_id, e.detail) for e in entries] == [
        (
            "decision_refused",
            "U5",
            "slack",
            "i1",
            {"decision": "approve", "why": "not an approver of this item"},
        ),
        ("start_refused", "U5", "slack", None, {"why": "may not start runs through this channel"}),
        (
            "decision_refused",
            "token:agent",
            "api",
            None,
            {
                "why": "a token of scope ask may only file requests, read and wait on its own "
                "requests, and use the MCP tools",
                "principal": "token agent (ask)",
            },
        ),
    ]
