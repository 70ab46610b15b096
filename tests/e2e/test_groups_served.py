"""Groups, on-call and the escalation ladder end to end: a real server process with Slack in
HTTP mode (the local Web API recorder, correctly signed interaction payloads).

The skills folder holds `groups.yaml` (the people, and the groups `sre` and `leads`) shared
by four skills: `test` asks `group:sre`; `ladder` widens to `group:leads` after a few
seconds and then rejects; `ruled` does the same through the ladder of the rule that asked; `oncall` asks whoever is on call in a rota that hands over a few
seconds after the test writes it (the time is given in the rota, so nothing waits a week).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
import yaml

from tests.e2e.test_two_person import SECRET, audit_of, blocks, click_approve, item_becomes
from tests.peers.slack_api import Call, SlackApi, http_mode_env
from tests.peers.stack import Stack
from tests.peers.stories import send_then_summarise

pytestmark = [pytest.mark.asyncio(loop_scope="module")]

ALICE, BOB, CAROL = "U0ALICE", "U0BOB", "U0CAROL"
GROUPS = {
    "people": {
        "alice": {"slack": ALICE},
        "bob": {"slack": BOB},
        "carol": {"slack": CAROL},
    },
    "groups": {"sre": ["alice", "bob"], "leads": ["carol"]},
}
ASK = {"crm.send_email": {"policy": "ask"}}
SKILL: dict[str, Any] = {"approvers": ["group:sre"], "deliver": {"slack": "C0OPS"}, "tools": ASK}
LADDER: dict[str, Any] = {
    **SKILL,
    "name": "ladder",
    "tools": {
        "crm.send_email": {
            "policy": "ask",
            "escalate": [{"after": "6s", "to": "group:leads"}, {"after": "12s", "then": "reject"}],
        }
    },
}

# The tool's own ladder is slow; the rule that asks about mails to Ann has a quick one.
RULED: dict[str, Any] = {
    **SKILL,
    "name": "ruled",
    "tools": {
        "crm.send_email": {
            "policy": "ask",
            "escalate": [{"after": "1h", "to": "bob"}, {"after": "2h", "then": "halt"}],
            "rules": [
                {
                    "when": {"to": {"matches": "ann@.*"}},
                    "policy": "ask",
                    "reason": "a customer",
                    "escalate": [
                        {"after": "5s", "to": "group:leads"},
                        {"after": "10s", "then": "reject"},
                    ],
                }
            ],
        }
    },
}


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def slack() -> AsyncIterator[SlackApi]:
    async with SlackApi() as api:
        yield api


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def stack(slack: SlackApi, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Stack]:
    root = tmp_path_factory.mktemp("groups")
    (root / "skills").mkdir()
    (root / "skills" / "groups.yaml").write_text(yaml.safe_dump(GROUPS))
    env = {**http_mode_env(slack.url, SECRET), "PIZZABOT_TIMERS_INTERVAL": "0.5"}
    async with Stack(
        root, script=send_then_summarise, skill=SKILL, extra_skills=[LADDER, RULED], env=env
    ) as st:
        yield st


async def card_to(slack: SlackApi, item_id: str, channel: str, timeout: float = 30) -> Call:
    """The card of `item_id` posted to `channel`, or to a person's (U…) direct messages (the
    conversation the recorder opens for them)."""
    if channel.startswith("U"):
        channel = "D" + channel.lstrip("UW")
    [post] = await slack.wait_for(
        "chat.postMessage",
        lambda c: item_id in blocks(c) and c.args.get("channel") == channel,
        timeout=timeout,
    )
    return post


async def told(slack: SlackApi, user: str, text: str) -> None:
    await slack.wait_for(
        "chat.postEphemeral", lambda c: c.args.get("user") == user and text in c.args["text"]
    )


async def audit_details(st: Stack, action: str) -> list[dict[str, Any]]:
    async with st.client() as c:
        entries = (await c.get("/api/audit")).json()["items"]
    return [e["detail"] for e in reversed(entries) if e["action"] == action]


async def test_any_one_of_a_group_decides_the_card(stack: Stack, slack: SlackApi) -> None:
    st = stack
    run = await st.start_run("test", "mail Ann")
    item = await st.wait_item(run["id"])
    post = await card_to(slack, item["id"], "C0OPS")

    await click_approve(st, item, post, CAROL)  # a lead, not in sre
    await told(slack, CAROL, "nothing was decided")
    await click_approve(st, item, post, BOB)
    decided = await item_becomes(st, item["id"], "approved")
    assert (decided["decided_by"], decided["decided_via"]) == (BOB, "slack")
    await st.wait_run(run["id"], {"done"})
    assert ("decision_refused", CAROL, "slack") in await audit_of(st, item["id"])


async def test_the_ladder_widens_to_leads_then_rejects(stack: Stack, slack: SlackApi) -> None:
    st = stack
    widened_run = await st.start_run("ladder", "mail Ann")
    ignored_run = await st.start_run("ladder", "mail Ann again")
    widened = await st.wait_item(widened_run["id"])
    ignored = await st.wait_item(ignored_run["id"])
    post = await card_to(slack, widened["id"], "C0OPS")
    assert "If nobody decides: 6s: sent to group:leads, who may decide · 12s: rejected" in (
        blocks(post)
    )
    assert widened["risk"]["ladder"] == "6s: sent to group:leads, who may decide · 12s: rejected"

    # Carol leads: the card reaches her when the ladder widens, and from then she decides.
    dm = await card_to(slack, widened["id"], CAROL)
    assert "So far: 6s: sent to group:leads (carol)" in blocks(dm)
    await slack.wait_for(  # the first copy is redrawn to say so
        "chat.update",
        lambda c: c.args.get("ts") == post.answer["ts"] and "sent to group:leads" in blocks(c),
    )
    await click_approve(st, widened, dm, CAROL)
    decided = await item_becomes(st, widened["id"], "approved")
    assert decided["decided_by"] == CAROL
    await st.wait_run(widened_run["id"], {"done"})

    # Nobody decides the other: it is rejected, honestly, and every copy says so.
    expired = await item_becomes(st, ignored["id"], "expired")
    assert expired["decided_by"] == "timeout"
    done = await st.wait_run(ignored_run["id"], {"done"})
    assert "No one answered" in (done.get("result") or "")
    trail = [t[0] for t in await audit_of(st, ignored["id"])]
    assert trail.index("approval_escalated") < trail.index("decision")
    steps = [d for d in await audit_details(st, "approval_escalated") if d["people"] == ["carol"]]
    assert len(steps) == 2 and all(d["to"] == ["group:leads"] for d in steps)


async def test_the_asking_rules_ladder_widens_then_rejects(stack: Stack, slack: SlackApi) -> None:
    st = stack
    run = await st.start_run("ruled", "mail Ann")
    item = await st.wait_item(run["id"])
    shown = "5s: sent to group:leads, who may decide · 10s: rejected"
    assert item["risk"]["ladder"] == shown
    post = await card_to(slack, item["id"], "C0OPS")
    assert f"If nobody decides: {shown}" in blocks(post)

    # The rule's ladder, not the tool's slow one: Carol has the card within seconds.
    dm = await card_to(slack, item["id"], CAROL)
    assert "So far: 5s: sent to group:leads (carol)" in blocks(dm)
    expired = await item_becomes(st, item["id"], "expired")
    assert expired["decided_by"] == "timeout"
    done = await st.wait_run(run["id"], {"done"})
    assert "No one answered" in (done.get("result") or "")
    [step] = [
        d
        for d in await audit_details(st, "approval_escalated")
        if d["step"] == "step1" and d["to"] == ["group:leads"] and d["people"] == ["carol"]
    ][-1:]
    assert step["after"] == "5s"


async def test_a_hand_over_routes_the_card_to_the_new_person(stack: Stack, slack: SlackApi) -> None:
    st = stack
    # Alice takes over a few seconds from now: until then the turn before hers is Bob's.
    handover = dt.datetime.now(dt.UTC).replace(microsecond=0) + dt.timedelta(seconds=15)
    rota = {
        "people": ["alice", "bob"],
        "handover": {
            "weekday": handover.strftime("%a").lower(),
            "at": handover.strftime("%H:%M:%S"),
        },
        "timezone": "UTC",
        "starts": handover.date().isoformat(),
    }
    st.write_skill(
        {
            **SKILL,
            "name": "oncall",
            "groups": {"pager": {"rota": rota}},
            "approvers": ["group:pager"],
        }
    )
    async with st.client() as c:
        r = await c.post("/api/skills/reload")
        assert r.status_code == 200 and "oncall" in r.text, r.text
    run = await st.start_run("oncall", "mail Ann")
    item = await st.wait_item(run["id"])
    assert dt.datetime.now(dt.UTC) < handover, "the machine was too slow to start the card"
    await card_to(slack, item["id"], BOB)
    alice_card = await card_to(slack, item["id"], ALICE)

    assert "on call in pager: bob · on call in pager: alice" in blocks(alice_card)
    turns = [d for d in await audit_details(st, "approval_on_call") if d["group"] == "pager"]
    assert [d["person"] for d in turns] == ["bob", "alice"]
    assert turns[1]["since"] == handover.isoformat()
    await click_approve(st, item, alice_card, ALICE)
    decided = await item_becomes(st, item["id"], "approved")
    assert decided["decided_by"] == ALICE
