"""An identity with a look-alike character is nobody, through every channel.

`str.lower()` maps some non-ASCII letters onto ASCII ones (U+212A KELVIN SIGN becomes `k`),
so a check that lower-cases an actor before comparing lets `\u212aate@…` decide as the
approver `kate@…`. The policy compares each channel's identities exactly after one strict
normalisation (Slack ids as given; email addresses lower-cased only when plain ASCII), so
every look-alike below is refused: deciding through the real `Inbox.decide` (the item stays
pending, the refusal is audited), and starting, following up and seeing items in the policy.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pizzabot.agent.errors import NotAllowed
from pizzabot.agent.model import Approve, Box, ItemStatus
from pizzabot.agent.policy import Access, Principal
from pizzabot.agent.skills import SkillBook
from pizzabot.agent.testing.scripts import Reply, ToolCall, last_tool_result
from tests.peers.inproc import InProcess

KATE, LEAD, SLACK_KATE, SLACK_LEAD = "kate@example.test", "lead@example.test", "UKATE", "ULEAD"
#: The real identity each look-alike imitates, by channel.
LOOKALIKES: dict[str, list[tuple[str, str]]] = {
    "email": [
        ("\u212aate@example.test", KATE),  # KELVIN SIGN: lower() makes it "kate@"
        ("kate@example.te\u0455t", KATE),  # CYRILLIC SMALL LETTER DZE for "s"
        ("kate@example.test\u200b", KATE),  # a zero-width space after it
        ("\u212aATE@EXAMPLE.TEST", KATE),
        ("lead@exampl\u0435.test", LEAD),  # CYRILLIC SMALL LETTER IE, escalation approver
        ("\u24dbead@example.test", LEAD),  # CIRCLED LATIN SMALL LETTER L
    ],
    "slack": [
        ("U\u212aATE", SLACK_KATE),
        ("UKATE\u200b", SLACK_KATE),
        ("ukate", SLACK_KATE),  # Slack ids are compared as Slack gives them
        ("\uff35KATE", SLACK_KATE),  # FULLWIDTH LATIN CAPITAL LETTER U
        ("U\u216cEAD", SLACK_LEAD),  # ROMAN NUMERAL FIFTY for "L", escalation approver
    ],
}
SKILL: dict[str, Any] = {
    "approvers": {"slack": [SLACK_KATE], "email": [KATE]},
    "deliver": {"slack": SLACK_KATE, "email": [KATE]},
    "tools": {
        "crm.send_email": {
            "policy": "ask",
            "escalate_to": {"approvers": {"slack": [SLACK_LEAD], "email": [LEAD]}},
        }
    },
}


def send_once(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Reply:
    if last_tool_result(messages) is None:
        return Reply(
            tool_calls=[ToolCall("crm__send_email", {"to": "a@b.c", "subject": "s", "body": "b"})]
        )
    return Reply(text="ok")


@pytest.mark.parametrize("channel", sorted(LOOKALIKES))
async def test_a_look_alike_of_an_approver_cannot_decide(channel: str, tmp_path: Path) -> None:
    async with InProcess(tmp_path, send_once, skill=SKILL) as h:
        run = await h.runs.start("test", "go", by=Principal.owner("api"))
        await h.wait(run.id, {"waiting"})
        (item,) = await h.store.list_items(box=Box.ACTION, status=ItemStatus.PENDING)
        for lookalike, _real in LOOKALIKES[channel]:
            with pytest.raises(NotAllowed):
                await h.inbox.decide(item.id, Approve(), by=Principal.of(channel, lookalike))
        assert (await h.store.get_item(item.id)).status is ItemStatus.PENDING
        refused = [e.actor for e in await h.store.audit_log() if e.action == "decision_refused"]
        assert sorted(refused) == sorted(fake for fake, _ in LOOKALIKES[channel])
        # The one it imitates may decide: the refusals above were the look-alikes'.
        await h.inbox.decide(
            item.id, Approve(), by=Principal.of(channel, LOOKALIKES[channel][0][1])
        )
        assert (await h.store.get_item(item.id)).status is ItemStatus.APPROVED


@pytest.mark.parametrize("channel", sorted(LOOKALIKES))
async def test_the_policy_refuses_look_alikes_every_act(channel: str, tmp_path: Path) -> None:
    async with InProcess(tmp_path, send_once, skill=SKILL) as h:
        access = Access(skills=h.ctx.skills, email_senders=[KATE, LEAD])
        run = await h.runs.start("test", "go", by=Principal.owner("api"))
        await h.wait(run.id, {"waiting"})
        (item,) = await h.store.list_items(box=Box.ACTION, status=ItemStatus.PENDING)
        for lookalike, real in LOOKALIKES[channel]:
            honest, fake = Principal.of(channel, real), Principal.of(channel, lookalike)
            assert access.may_decide(honest, item), real
            assert access.may_start(honest) or real == SLACK_LEAD
            for verdict in (
                access.may_decide(fake, item),
                access.may_start(fake, "test"),
                access.may_follow_up(fake, "test"),
            ):
                assert not verdict and verdict.why.startswith(("not ", "may not ")), verdict
            assert not access.may_see(fake, item)
            assert not access.knows(fake)


def test_the_owner_needs_no_identity_and_channels_without_people_have_none() -> None:
    access = Access(skills=SkillBook({}), email_senders=[KATE])
    for channel in ("api", "web", "cli"):
        assert access.may_start(Principal.owner(channel)).why.startswith("an admin")
    for channel in ("timer", "hook", "schedule", ""):
        assert not access.may_start(Principal.of(channel, KATE))
        assert not access.knows(Principal.of(channel, KATE))
