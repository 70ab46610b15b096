"""Slack in Socket Mode, end to end: the server asks the Web API recorder for a websocket URL
(`apps.connections.open` with the app token), connects to the test's local websocket, and
acknowledges the envelopes pushed to it by their `envelope_id`."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

from tests.peers.slack_api import (
    SlackApi,
    block_actions,
    event_callback,
    field_blocks,
    filled_values,
    message_ts,
    view_submission,
)
from tests.peers.stack import Stack
from tests.peers.stories import send_then_summarise


def envelope(kind: str, payload: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "envelope_id": str(uuid.uuid4()),
        "type": kind,
        "accepts_response_payload": kind != "events_api",
        "payload": payload,
        **extra,
    }


async def test_socket_mode_acks_envelopes_and_decides(tmp_path: Path) -> None:
    async with SlackApi() as slack:
        env = {
            "PIZZABOT_SLACK_MODE": "socket",
            "PIZZABOT_SLACK_BOT_TOKEN": "xoxb-test",
            "PIZZABOT_SLACK_APP_TOKEN": "xapp-test",
            "PIZZABOT_SLACK_API_URL": slack.url,
            "PIZZABOT_SLACK_DEFAULT_SKILL": "test",
        }
        skill = {"deliver": {"slack": "U1"}, "approvers": {"slack": ["U1"]}}
        async with Stack(tmp_path, script=send_then_summarise, skill=skill, env=env) as st:
            [opened] = await slack.wait_for("apps.connections.open")
            assert opened.token == "xapp-test"
            await slack.wait_for("socket.connected")
            async with st.client() as c:  # no public endpoint in Socket Mode
                assert (await c.post("/slack/events", content=b"x")).status_code == 404

            run = await st.start_run("test", "mail Ann")
            item = await st.wait_item(run["id"])
            [post] = await slack.wait_for(
                "chat.postMessage", lambda c: item["id"] in json.dumps(c.args.get("blocks"))
            )
            assert post.args["channel"] == "D1"  # a user address is a DM
            ts = str(post.answer["ts"])

            # Edit with a bad value: the ack itself carries the inline errors.
            click = block_actions(
                action_id="pizza_edit", value=item["id"], user="U1", channel="D1", message_ts=ts
            )
            ack = await slack.push(envelope("interactive", click))
            assert ack == {"envelope_id": ack["envelope_id"]}
            [opened_view] = await slack.wait_for(
                "views.open", lambda c: c.args.get("trigger_id") == click["trigger_id"]
            )
            view = opened_view.args["view"]
            copies = field_blocks(item)["copies"]
            values = filled_values(view, **{copies: "0"})
            bad = view_submission(view=view, user="U1", values=values)
            sent = envelope("interactive", bad)
            ack = await slack.push(sent)
            assert ack["envelope_id"] == sent["envelope_id"]
            assert ack["payload"]["response_action"] == "errors"
            assert set(ack["payload"]["errors"]) == {copies}

            approve = block_actions(
                action_id="pizza_approve", value=item["id"], user="U1", channel="D1", message_ts=ts
            )
            sent = envelope("interactive", approve)
            ack = await slack.push(sent)
            assert ack == {"envelope_id": sent["envelope_id"]}
            await st.wait_run(run["id"], {"done"})
            async with st.client() as c:
                decided = (await c.get(f"/api/items/{item['id']}")).json()
            assert (decided["status"], decided["decided_by"], decided["decided_via"]) == (
                "approved",
                "U1",
                "slack",
            )
            await slack.wait_for(
                "chat.update",
                lambda c: c.args.get("ts") == ts and "Approved by <@U1>" in json.dumps(c.args),
            )

            # A retried event is acked and dropped: one DM, one run.
            dm = event_callback(
                {
                    "type": "message",
                    "channel": "D1",
                    "channel_type": "im",
                    "user": "U1",
                    "text": "mail Bob",
                    "ts": message_ts(),
                }
            )
            first = envelope("events_api", dm, retry_attempt=0, retry_reason="")
            retry = envelope("events_api", dm, retry_attempt=1, retry_reason="timeout")
            assert (await slack.push(first))["envelope_id"] == first["envelope_id"]
            assert (await slack.push(retry))["envelope_id"] == retry["envelope_id"]
            await slack.wait_for(
                "chat.postMessage",
                lambda c: c.args.get("channel") == "D1" and "Started run" in c.args.get("text", ""),
            )
            async with st.client() as c:
                runs = (await c.get("/api/runs")).json()["items"]
            assert [r["input"] for r in runs].count("mail Bob") == 1
            slack.check()  # Slack accepts everything the server sent
