"""A request from another agent on Slack, end to end in HTTP mode: a real server, Slack's Web
API played by a local recorder, and a correctly signed click on the request's card. The card
is the one every Action item gets; the click decides the request, and its long-poll says who
decided, through Slack."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import yaml

from tests.peers.server import ServerProcess
from tests.peers.slack_api import (
    SlackApi,
    block_actions,
    button_value,
    http_mode_env,
    post_interaction,
)

SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
APPROVER = "U1"
SKILL = {
    "name": "deploys",
    "approvers": {"slack": [APPROVER]},
    "deliver": {"slack": "C123"},
    "tools": {"deploy.prod": {"policy": "ask", "impact": "high"}},
}


async def test_a_request_is_decided_from_its_slack_card(tmp_path: Path) -> None:
    skills = tmp_path / "skills"
    skills.mkdir()
    (skills / "deploys.yaml").write_text(yaml.safe_dump(SKILL))
    async with SlackApi() as slack:
        env = http_mode_env(slack.url, SECRET, PIZZABOT_PUBLIC_URL="http://pizza.example")
        server = ServerProcess(data_dir=tmp_path / "data", skills_dir=skills, env=env)
        await server.start()
        try:
            async with server.client() as c:
                r = await c.post(
                    "/api/requests",
                    json={
                        "skill": "deploys",
                        "title": "Deploy 1.2.3 to prod",
                        "tool": "deploy.prod",
                        "args": {"env": "prod", "version": "1.2.3"},
                        "description": "Ships the login fix",
                    },
                )
                assert r.status_code == 201, r.text
                created = r.json()
                [card] = await slack.wait_for(
                    "chat.postMessage",
                    lambda call: created["item_id"] in json.dumps(call.args.get("blocks") or ""),
                )
                shown = json.dumps(card.args["blocks"])
                assert "Deploy 1.2.3 to prod" in shown and "Ships the login fix" in shown
                assert "1.2.3" in shown
                waiting = asyncio.create_task(
                    c.get(f"/api/requests/{created['id']}", params={"wait": 30}, timeout=60)
                )
                click = block_actions(
                    action_id="pizza_approve",
                    value=button_value(card, "pizza_approve"),
                    user=APPROVER,
                    channel=str(card.answer["channel"]),
                    message_ts=str(card.answer["ts"]),
                )
                answer = await post_interaction(f"{server.url}/slack/events", click, secret=SECRET)
                assert answer.status_code == 200, answer.text
                state = (await waiting).json()
                assert (state["status"], state["decided_by"], state["via"]) == (
                    "approved",
                    APPROVER,
                    "slack",
                )
                assert state["args"] == {"env": "prod", "version": "1.2.3"}
                # Every copy shows the outcome, as for any item.
                await slack.wait_for(
                    "chat.update", lambda call: call.args.get("ts") == card.answer["ts"]
                )
        finally:
            server.stop()
