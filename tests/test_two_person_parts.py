"""Two-person approval in the parts a server is made of: the web inbox (the owner's channel)
in-process over httpx, the inbox's decide with a real SQL store, and skill files as the
loader reads them.

The end-to-end stories across Slack and email are in `test_two_person.py`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from pizzabot.agent.errors import AlreadyApproved, InvalidArguments, SkillError
from pizzabot.agent.model import Approve, Edit, ItemStatus, Reject, Risk
from pizzabot.agent.policy import Access, Principal
from pizzabot.agent.skills import Skill, SkillBook, parse_skill
from pizzabot.store.approvals import SqlApprovals
from tests.peers.web import WebApp, csrf_of

pytestmark = pytest.mark.asyncio

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"to": {"type": "string"}, "amount": {"type": "integer"}},
    "required": ["to", "amount"],
}
ARGS = {"to": "ann@example.com", "amount": 300}

SKILL = Skill.model_validate(
    {
        "name": "test",
        "instructions": "test",
        "model": "openai/none",
        "people": {
            "alice": {"slack": "U0ALICE", "email": "Alice@Corp.example"},
            "bob": {"slack": "U0BOB"},
        },
        "approvers": ["alice", "bob"],
        "tools": {"crm.send_email": {"policy": "ask", "approvals": {"required": 2}}},
    }
)


@pytest_asyncio.fixture
async def web(tmp_path: Path) -> AsyncIterator[WebApp]:
    async with WebApp(tmp_path, skill=SKILL) as app:
        app.ctx.approvals = SqlApprovals(app.store.db)
        yield app


async def two_person_item(web: WebApp) -> str:
    item = await web.action_item(schema=SCHEMA, args=ARGS, risk=Risk(approvals_required=2))
    return item.id


async def approvals_in_audit(web: WebApp, item_id: str) -> list[tuple[str, str, str]]:
    return [
        (e.action, e.actor, e.channel)
        for e in reversed(await web.store.audit_log())
        if e.item_id == item_id and e.action.startswith("approval")
    ]


async def test_the_owner_counts_once_on_the_web_page_and_the_page_says_so(web: WebApp) -> None:
    item_id = await two_person_item(web)
    async with web.client(logged_in=True) as c:
        page = await c.get(f"/items/{item_id}")
        assert "0 of 2 approved" in page.text
        csrf = csrf_of(page.text)
        first = await c.post(
            f"/items/{item_id}", data={"csrf": csrf, "decision": "approve"}, follow_redirects=True
        )
        assert "Your approval is counted: another person must approve as well." in first.text
        assert "1 of 2 approved: owner via the web page" in first.text
        again = await c.post(
            f"/items/{item_id}", data={"csrf": csrf, "decision": "approve"}, follow_redirects=True
        )
        assert "You approved this already: another person must approve it." in again.text
    assert (await web.store.get_item(item_id)).status is ItemStatus.PENDING

    # Bob on Slack is the second person: the call is approved.
    done = await web.inbox.decide(item_id, Approve(), by=Principal.of("slack", "U0BOB"))
    assert done.status is ItemStatus.APPROVED and done.final_args == ARGS
    assert done.risk.approved == ("owner via the web page", "bob via Slack")
    assert await approvals_in_audit(web, item_id) == [
        ("approval", "owner", "web"),
        ("approval_refused", "owner", "web"),
        ("approval", "U0BOB", "slack"),
    ]


async def test_two_clicks_of_one_person_at_once_count_once(web: WebApp) -> None:
    item_id = await two_person_item(web)
    results = await asyncio.gather(
        *(
            web.inbox.decide(item_id, Approve(), by=Principal.of("slack", "U0ALICE"))
            for _ in range(2)
        ),
        return_exceptions=True,
    )
    assert sum(isinstance(r, AlreadyApproved) for r in results) == 1
    # Her address in any case is still alice: not a second person.
    with pytest.raises(AlreadyApproved, match="alice approved this already"):
        await web.inbox.decide(item_id, Approve(), by=Principal.of("email", "alice@corp.example"))
    item = await web.store.get_item(item_id)
    assert item.status is ItemStatus.PENDING and item.risk.approved == ("alice via Slack",)


async def test_an_edit_counts_its_editor_and_a_reject_then_ends_it(web: WebApp) -> None:
    item_id = await two_person_item(web)
    await web.inbox.decide(item_id, Approve(), by=Principal.of("slack", "U0BOB"))
    edited = await web.inbox.decide(
        item_id, Edit({**ARGS, "amount": 250}), by=Principal.of("slack", "U0ALICE")
    )
    assert edited.status is ItemStatus.PENDING and edited.args == {**ARGS, "amount": 250}
    assert edited.risk.approved == ("alice via Slack",)  # bob's was for other arguments
    ended = await web.inbox.decide(
        item_id, Reject("not this month"), by=Principal.of("slack", "U0BOB")
    )
    assert ended.status is ItemStatus.REJECTED and ended.reason == "not this month"
    assert ended.decided_by == "U0BOB"


async def test_without_a_place_to_count_nothing_is_approved(tmp_path: Path) -> None:
    async with WebApp(tmp_path, skill=SKILL) as web:  # no approvals store: fail closed
        item_id = await two_person_item(web)
        with pytest.raises(InvalidArguments, match="needs 2 people's approval"):
            await web.inbox.decide(item_id, Approve(), by=Principal.of("slack", "U0ALICE"))
        assert (await web.store.get_item(item_id)).status is ItemStatus.PENDING


async def test_people_named_as_approvers_may_decide_on_each_of_their_channels() -> None:
    access = Access(skills=SkillBook({"test": SKILL}))
    assert access.knows(Principal.of("slack", "U0ALICE"))
    assert access.knows(Principal.of("email", "alice@corp.example"))
    assert access.knows(Principal.of("slack", "U0BOB"))
    assert not access.knows(Principal.of("email", "bob@corp.example"))
    assert access.may_start(Principal.of("slack", "U0BOB"))  # a Slack approver, by name


SKILL_FILE = """\
name: pay
instructions: pay
model: openai/none
people:
  alice: {slack: U1, email: alice@corp.example}
  bob: {email: Alice@corp.example}
approvers: [alice, bob]
"""


@pytest.mark.parametrize(
    ("text", "said"),
    [
        (SKILL_FILE, "alice and bob have the same email 'alice@corp.example'"),
        (
            SKILL_FILE.replace("Alice@corp.example", "bob@corp.example").replace(
                "[alice, bob]", "[alice, dave]"
            ),
            "'dave' is not in people (people: alice, bob)",
        ),
        (
            SKILL_FILE.replace("bob: {email: Alice@corp.example}", "bob: {}"),
            "person 'bob' has no identity",
        ),
        (
            SKILL_FILE.replace("bob: {email: Alice@corp.example}", "bob: {email: b@c.example}")
            + "tools:\n  bank.transfer: {approvals: {required: 0}}\n",
            "greater than or equal to 1",
        ),
    ],
)
async def test_a_wrong_people_list_refuses_the_skill_and_says_why(text: str, said: str) -> None:
    with pytest.raises(SkillError) as refused:
        parse_skill(text, "pay.yaml")
    assert said in str(refused.value) and "pay.yaml" in str(refused.value)
