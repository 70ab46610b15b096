"""`notify`, end to end: a real server whose scripted model asks the "shop" MCP server to
refund, Slack's Web API played by a local recorder, and the web page. A refund the policy
says to notify about runs at once, and its approvers find an FYI in Unread, on Slack and on
the page; a deny rule still refuses a refund over 5,000; the kill switch still stops runs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from tests.e2e.test_rules import call_from_input, event, refunds, run_call, web_page
from tests.peers import mcp_tools
from tests.peers.server import ServerProcess
from tests.peers.slack_api import SlackApi, http_mode_env
from tests.peers.stack import Stack

SECRET = "8f742231b10e8888abcd99yyyzzz85a5"


def notify_skill(tools_log: Path) -> dict[str, Any]:
    refund = {
        "policy": "notify",
        "rules": [
            {
                "when": {"amount": {"gt": 5000}},
                "policy": "deny",
                "reason": "refunds over 5,000 go through finance",
            },
            {"when": {"currency": "EUR", "amount": {"lte": 10}}, "policy": "auto"},
        ],
    }
    return {
        "mcp_servers": {"shop": mcp_tools.shop_server(tools_log)},
        "tools": {"shop.refund": refund, "crm.*": "auto"},
        "approvers": {"slack": ["U1"]},
        "deliver": {"slack": "C123"},
    }


async def test_a_notify_call_runs_at_once_and_its_approvers_are_told(tmp_path: Path) -> None:
    async with SlackApi() as slack:
        env = http_mode_env(slack.url, SECRET, PIZZABOT_PUBLIC_URL="http://pizza.example")
        async with Stack(
            tmp_path,
            script=call_from_input,
            skill=notify_skill(tmp_path / "tools.jsonl"),
            env=env,
        ) as st:
            run = await run_call(st, "shop__refund", {"amount": 40, "currency": "EUR"})
            # It ran without a card: no Action item, the refund made, the run done.
            assert run["status"] == "done", run
            assert [(r["amount"], r["currency"]) for r in refunds(st)] == [(40, "EUR")]
            assert event(run, "tool_result")["is_error"] is False
            assert not any(e["kind"] == "tool_request" for e in run["events"])

            # The FYI: Unread (not Action), on Slack and on the web page.
            fyi = await st.wait_item(run["id"], box="unread", count=2)
            async with st.client() as c:
                unread = (await c.get("/api/inbox", params={"box": "unread"})).json()["items"]
                action = (await c.get("/api/inbox", params={"box": "action"})).json()["items"]
                audit = (await c.get("/api/audit")).json()["items"]
            [note] = [i for i in unread if i["title"] == "FYI: test ran shop.refund"]
            assert not [i for i in action if i["run_id"] == run["id"]]
            assert fyi["run_id"] == run["id"]
            [posted] = await slack.wait_for(
                "chat.postMessage",
                lambda call: "FYI: test ran shop.refund" in json.dumps(call.args),
            )
            assert posted.args["channel"] == "C123"
            shown = json.dumps(posted.args)
            assert "ran without asking" in shown and "40" in shown
            page = await web_page(st, "/")
            assert "FYI: test ran shop.refund" in page
            item_page = await web_page(st, f"/items/{note['id']}")
            assert "the policy of shop.refund says notify" in item_page
            assert any(e["action"] == "notified" and e["item_id"] == note["id"] for e in audit)

            # A deny rule still wins: nothing runs, nobody is notified of it.
            denied = await run_call(st, "shop__refund", {"amount": 6000, "currency": "EUR"})
            assert "refunds over 5,000 go through finance" in denied["result"]
            assert len(refunds(st)) == 1
            # A rule that says auto runs it without an FYI.
            quiet = await run_call(st, "shop__refund", {"amount": 5, "currency": "EUR"})
            assert quiet["status"] == "done"
            assert len(refunds(st)) == 2
            async with st.client() as c:
                unread = (await c.get("/api/inbox", params={"box": "unread"})).json()["items"]
                fyis = [i for i in unread if i["title"].startswith("FYI:")]
                assert [i["run_id"] for i in fyis] == [run["id"]]

                # The kill switch stops it as it stops every run: nothing starts, nothing runs.
                assert (await c.post("/api/kill", json={"reason": "test"})).status_code == 200
                r = await c.post(
                    "/api/runs",
                    json={
                        "skill": "test",
                        "input": json.dumps(
                            {"tool": "shop__refund", "args": {"amount": 40, "currency": "EUR"}}
                        ),
                    },
                )
                assert r.status_code == 409, r.text
            assert len(refunds(st)) == 2


async def test_a_request_a_notify_rule_decides_is_approved_and_told(tmp_path: Path) -> None:
    skills = tmp_path / "skills"
    skills.mkdir()
    deploys = {
        "name": "deploys",
        "approvers": {"slack": ["U1"]},
        "deliver": {"slack": "C123"},
        "tools": {
            "deploy.restart": {
                "policy": "ask",
                "rules": [{"when": {"env": "staging"}, "policy": "notify"}],
            }
        },
    }
    (skills / "deploys.yaml").write_text(yaml.safe_dump(deploys))
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
                        "title": "Restart staging",
                        "tool": "deploy.restart",
                        "args": {"env": "staging"},
                    },
                )
                assert r.status_code == 201, r.text
                state = r.json()
                assert (state["status"], state["via"]) == ("approved", "policy")
                [posted] = await slack.wait_for(
                    "chat.postMessage",
                    lambda call: "FYI: deploys ran deploy.restart" in json.dumps(call.args),
                )
                assert "owner asked to run deploy.restart: approved at once" in json.dumps(
                    posted.args
                )
                # A call no rule notifies about is asked, as ever.
                r = await c.post(
                    "/api/requests",
                    json={
                        "skill": "deploys",
                        "title": "Restart prod",
                        "tool": "deploy.restart",
                        "args": {"env": "prod"},
                    },
                )
                assert r.json()["status"] == "pending"
        finally:
            server.stop()
