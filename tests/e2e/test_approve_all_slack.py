"""Approve all in Slack, end to end in HTTP mode: the model asks for three calls in one reply,
each card carries "Approve all (3)", and a click by a person who may approve only the mails
(the mails escalate to them; the lookup does not) approves those two, each on its own, and
tells them the lookup was left out. A real server process, Slack's Web API played by a local
recorder, a correctly signed click."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.peers.batch_stories import three_at_once
from tests.peers.slack_api import Call, SlackApi, block_actions, http_mode_env, post_interaction
from tests.peers.stack import Stack
from tests.waiting import eventually

SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
BOSS, HELPER = "U0BOSS", "U0HELP"

SKILL: dict[str, Any] = {
    "deliver": {"slack": "C123"},
    "approvers": {"slack": [BOSS]},
    "tools": {
        # The helper may decide the mails (they escalate to them), not the lookup.
        "crm.send_email": {"policy": "ask", "escalate_to": {"approvers": {"slack": [HELPER]}}},
        "crm.lookup": "ask",
    },
}


def text_of(call: Call) -> str:
    return json.dumps(call.args.get("blocks"), ensure_ascii=False)


def buttons_of(call: Call) -> dict[str, dict[str, Any]]:
    [actions] = [b for b in call.args["blocks"] if b["type"] == "actions"]
    return {e["action_id"]: e for e in actions["elements"]}


async def test_approve_all_in_slack_leaves_out_what_the_clicker_may_not_decide(
    tmp_path: Path,
) -> None:
    async with SlackApi() as slack:
        env = http_mode_env(slack.url, SECRET, PIZZABOT_PUBLIC_URL="http://pizza.example")
        async with Stack(tmp_path, script=three_at_once, skill=SKILL, env=env) as st:
            run = await st.start_run("test", "mail two customers and look Ada up")
            posts = await slack.wait_for(
                "chat.postMessage", lambda c: "approval needed" in text_of(c), count=3
            )
            # Every card of the turn offers the batch, beside its own buttons.
            for post in posts:
                batch = buttons_of(post)["pizza_approve_all"]
                assert batch["text"]["text"] == "Approve all (3)"
                assert "pizza_approve" in buttons_of(post)
            first = posts[0]

            click = block_actions(
                action_id="pizza_approve_all",
                value=buttons_of(first)["pizza_approve_all"]["value"],
                user=HELPER,
                channel=str(first.answer["channel"]),
                message_ts=str(first.answer["ts"]),
            )
            r = await post_interaction(f"{st.server.url}/slack/events", click, secret=SECRET)
            assert r.status_code == 200

            [note] = await slack.wait_for(
                "chat.postEphemeral", lambda c: c.args.get("user") == HELPER
            )
            said = str(note.args["text"])
            assert "Approved 2 of 3: crm.send_email, crm.send_email." in said
            assert "Left out crm.lookup: you may not decide this call here." in said

            async with st.client() as c:

                async def statuses() -> dict[str, list[str]] | None:
                    r = await c.get("/api/inbox", params={"box": "action", "all": "true"})
                    mine = [i for i in r.json()["items"] if i["run_id"] == run["id"]]
                    got: dict[str, list[str]] = {}
                    for i in mine:
                        got.setdefault(i["tool"], []).append(
                            f"{i['status']} {i['decided_by'] or ''}".strip()
                        )
                    done = got.get("crm.send_email") == [f"approved {HELPER}"] * 2
                    return got if done else None

                got = await eventually(statuses, what="the two mails approved by the helper")
                assert got["crm.lookup"] == ["pending"]

                # Each mail is its own audited decision; the lookup a refusal, audited too.
                audit = (await c.get("/api/audit")).json()["items"]
                acts = sorted(
                    (a["action"], a["actor"], a["channel"])
                    for a in audit
                    if a["run_id"] == run["id"]
                )
                assert acts == [
                    ("decision", HELPER, "slack"),
                    ("decision", HELPER, "slack"),
                    ("decision_refused", HELPER, "slack"),
                ]

            # The two mails' cards are updated to say who approved them.
            approved = await slack.wait_for(
                "chat.update", lambda c: f"Approved by <@{HELPER}>" in text_of(c), count=2
            )
            assert len({c.args["ts"] for c in approved}) == 2
            slack.check()


#: The lookup needs two people: one edit keeps it waiting, at a new version.
PAIR: dict[str, Any] = {
    "deliver": {"slack": "C123"},
    "approvers": {"slack": [BOSS]},
    "tools": {
        "crm.send_email": "ask",
        "crm.lookup": {"policy": "ask", "approvals": {"required": 2}},
    },
}


async def test_approve_all_from_a_card_drawn_before_an_edit_approves_nothing(
    tmp_path: Path,
) -> None:
    async with SlackApi() as slack:
        env = http_mode_env(slack.url, SECRET, PIZZABOT_PUBLIC_URL="http://pizza.example")
        async with Stack(tmp_path, script=three_at_once, skill=PAIR, env=env) as st:
            run = await st.start_run("test", "mail two customers and look Ada up")
            posts = await slack.wait_for(
                "chat.postMessage", lambda c: "approval needed" in text_of(c), count=3
            )
            first = posts[0]
            old_value = buttons_of(first)["pizza_approve_all"]["value"]
            assert len(old_value) < 2000  # what a Slack button's value may hold
            async with st.client() as c:
                items = (await c.get(f"/api/runs/{run['id']}/decisions")).json()["items"]
            lookup = next(i for i in items if i["tool"] == "crm.lookup")
            r = await st.decide(lookup["id"], "edit", args={"query": "Bea"})
            assert r.status_code == 200 and r.json()["status"] == "pending", r.text

            def clicked(value: str) -> dict[str, Any]:
                return block_actions(
                    action_id="pizza_approve_all",
                    value=value,
                    user=BOSS,
                    channel=str(first.answer["channel"]),
                    message_ts=str(first.answer["ts"]),
                )

            r = await post_interaction(
                f"{st.server.url}/slack/events", clicked(old_value), secret=SECRET
            )
            assert r.status_code == 200
            [note] = await slack.wait_for(
                "chat.postEphemeral", lambda c: c.args.get("user") == BOSS
            )
            said = str(note.args["text"])
            assert "Approved none of 3." in said
            assert said.count("this card changed") == 3
            assert st.tool_calls() == []

            # The turn's cards are drawn again; from the card as it is now, the mails go.
            redrawn = await slack.wait_for(
                "chat.update",
                lambda c: (
                    c.args["ts"] == first.answer["ts"]
                    and "pizza_approve_all" in text_of(c)
                    and buttons_of(c)["pizza_approve_all"]["value"] != old_value
                ),
            )
            new_value = buttons_of(redrawn[-1])["pizza_approve_all"]["value"]
            r = await post_interaction(
                f"{st.server.url}/slack/events", clicked(new_value), secret=SECRET
            )
            assert r.status_code == 200
            [_, again] = await slack.wait_for(
                "chat.postEphemeral", lambda c: c.args.get("user") == BOSS, count=2
            )
            said = str(again.args["text"])
            assert "Approved 2 of 3: crm.send_email, crm.send_email." in said
            assert "Left out crm.lookup: needs 2 approvals" in said
            slack.check()
