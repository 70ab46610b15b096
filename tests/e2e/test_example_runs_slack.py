"""The example skills that talk to hosted services complete a run, served by a real
`pizzabot serve` with the scripted model; their asks are answered through the API. No byte
leaves this machine: each service is a local peer the real client is pointed at.

- slack-summary: korotovsky's `slack-mcp-server` (the Go binary from npm, installed by
  `.ci/install-mcp-servers`) with the example's own environment, plus a proxy and a CA: it
  calls `https://slack.com/api/...` as it would for anyone, and `tests/peers/slack_proxy.py`
  ends that TLS and answers from the Slack Web API fake. The model reads the channel's day
  (at once), tries to post a summary that pings @here (refused by the skill's rule, unasked),
  then posts a plain one (asked); approved, the fake records the `chat.postMessage`.
- crm-log: HubSpot's hosted server, its address swapped for the OAuth peer
  (`tests/peers/mcp_oauth.py`) with HubSpot's tool names and, as HubSpot, no dynamic
  registration: the example's pre-registered client ID and secret (from the environment) are
  used. A person connects it from the card, the model finds the contact (at once) and logs a
  note (asked); approved, the peer has the note.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from pizzabot.agent.testing.model_server import ScriptedModelServer
from pizzabot.agent.testing.scripts import Reply, ToolCall, turns
from tests.e2e.test_example_runs import EXAMPLES, finished, pending_item, served_run
from tests.peers.mcp_oauth import OAuthMcp
from tests.peers.required import NPM_BIN
from tests.peers.server import ServerProcess
from tests.peers.slack_api import SlackApi
from tests.peers.slack_proxy import SlackProxy
from tests.waiting import eventually

#: The Go binary of `slack-mcp-server`, as its npm platform package installs it.
SLACK_MCP = NPM_BIN.parent / "slack-mcp-server-linux-amd64" / "bin" / "slack-mcp-server-linux-amd64"
SOURCE, SUMMARY = "C0123456789", "C0987654321"  # the channel IDs the example names


def shipped(name: str, model: ScriptedModelServer) -> dict[str, Any]:
    skill: dict[str, Any] = yaml.safe_load((EXAMPLES / f"{name}.yaml").read_text())
    skill["model"] = "openai/scripted"
    skill["model_options"] = {"api_base": model.openai_base, "api_key": "x"}
    skill.pop("schedules", None)
    return skill


def a_working_day(slack: SlackApi) -> None:
    def person(uid: str, name: str, real: str) -> dict[str, Any]:
        profile = {"real_name": real, "display_name": name}
        return {
            "id": uid,
            "team_id": "T0PIZZA",
            "name": name,
            "real_name": real,
            "profile": profile,
        }

    slack.users = [person("U0ANN", "ann", "Ann Lee"), person("U0BOB", "bob", "Bob Ray")]
    channel = {"is_channel": True, "is_member": True, "num_members": 2}
    slack.channels = [
        {"id": SOURCE, "name": "kitchen", **channel},
        {"id": SUMMARY, "name": "kitchen-digest", **channel},
    ]
    now = int(time.time())
    slack.history[SOURCE] = [
        {"type": "message", "user": "U0BOB", "text": "Oven 2 is fixed", "ts": f"{now - 60}.000200"},
        {
            "type": "message",
            "user": "U0ANN",
            "text": "Dough order late",
            "ts": f"{now - 90}.000100",
        },
    ]


@pytest.mark.npm
async def test_slack_summary_reads_the_day_and_posts_the_summary_once_approved(
    tmp_path: Path,
) -> None:
    assert os.access(SLACK_MCP, os.X_OK), f"{SLACK_MCP} is missing: run .ci/install-mcp-servers"
    summary = "- Oven 2 is fixed (Bob)\n- The dough order is late (Ann)"
    script = turns(
        Reply(tool_calls=[ToolCall("slack__conversations_history", {"channel_id": SOURCE})]),
        Reply(
            tool_calls=[
                ToolCall(
                    "slack__conversations_add_message",
                    {"channel_id": SUMMARY, "text": f"@here today:\n{summary}"},
                )
            ]
        ),
        Reply(
            tool_calls=[
                ToolCall(
                    "slack__conversations_add_message", {"channel_id": SUMMARY, "text": summary}
                )
            ]
        ),
        Reply(text="Posted today's summary."),
    )
    async with (
        SlackApi(workspace_url="https://pizza.slack.com/") as slack,
        SlackProxy(slack.port, tmp_path) as proxy,
        ScriptedModelServer(script) as model,
    ):
        a_working_day(slack)
        skill = shipped("slack-summary", model)
        server = skill["mcp_servers"]["slack"]
        assert server["command"] == "npx" and server["args"][1] == "slack-mcp-server@1.3.0"
        server["command"], server["args"] = str(SLACK_MCP), server["args"][2:]
        server["env"] |= {  # where Slack is reached; the rest is the example's own
            "SLACK_MCP_PROXY": proxy.url,
            "SLACK_MCP_SERVER_CA": str(proxy.certs.ca_file),
            "SLACK_MCP_USERS_CACHE": str(tmp_path / "users_cache.json"),
            "SLACK_MCP_CHANNELS_CACHE": str(tmp_path / "channels_cache.json"),
        }
        env = {
            "SLACK_MCP_XOXB_TOKEN": "xoxb-summary",
            "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin",
        }
        served, run_id = await served_run(tmp_path, skill, model, env)
        try:
            item = await pending_item(served, run_id)
            assert item["tool"] == "slack.conversations_add_message"
            assert item["args"] == {"channel_id": SUMMARY, "text": summary}
            assert slack.calls_to("chat.postMessage") == []  # nothing posted before approval
            async with served.client() as c:
                r = await c.post(f"/api/items/{item['id']}/decision", json={"decision": "approve"})
                assert r.status_code == 200, r.text
            run = await finished(served, run_id)
        finally:
            served.stop()
    assert run["status"] == "done", run
    events = json.dumps(run["events"])
    assert "Oven 2 is fixed" in events  # the history reached the model
    assert "a summary does not notify the whole channel" in events
    [posted] = slack.calls_to("chat.postMessage")
    assert posted.args["channel"] == SUMMARY and posted.token == "xoxb-summary"
    assert "Oven 2 is fixed" in json.dumps(posted.args) and "@here" not in json.dumps(posted.args)
    [read] = slack.calls_to("conversations.history")
    assert read.args["channel"] == SOURCE
    assert proxy.refused == []
    assert {t.partition(":")[0] for t in proxy.tunnels} <= {"slack.com", "pizza.slack.com"}


async def item_for(server: ServerProcess, run_id: str, tool: str) -> dict[str, Any]:
    async with server.client() as c:

        async def found() -> dict[str, Any] | None:
            items = (await c.get("/api/inbox", params={"box": "action"})).json()["items"]
            return next((i for i in items if i["run_id"] == run_id and i["tool"] == tool), None)

        return await eventually(found, what=f"the {tool} card", context=server.log)


async def test_crm_log_connects_with_its_preregistered_client_and_logs_a_note_once_approved(
    tmp_path: Path,
) -> None:
    note = {
        "objectType": "notes",
        "properties": {"hs_note_body": "Ann wants a quote for 40 pizzas; send it by Friday."},
        "associations": [{"to": {"id": "101"}, "types": [{"associationTypeId": 202}]}],
    }
    script = turns(
        Reply(
            tool_calls=[
                ToolCall("crm__search_crm_objects", {"objectType": "contacts", "query": "Ann"})
            ]
        ),
        Reply(
            tool_calls=[ToolCall("crm__manage_crm_objects", {"createRequest": {"objects": [note]}})]
        ),
        Reply(text="Logged the meeting with Ann Lee."),
    )
    async with (
        OAuthMcp(tmp_path, tools="hubspot", registration=False) as peer,
        ScriptedModelServer(script) as model,
    ):
        skill = shipped("crm-log", model)
        crm = skill["mcp_servers"]["crm"]
        assert crm["url"] == "https://mcp.hubspot.com/" and crm["auth"] == "oauth"
        crm["url"] = peer.url
        env = {
            "HUBSPOT_CLIENT_ID": "pizzabot-at-hubspot",
            "HUBSPOT_CLIENT_SECRET": "hubspot-secret",
            "MEETING_NOTES_SECRET": "notes-secret",
            "SSL_CERT_FILE": str(peer.certs.ca_file),
        }
        served, run_id = await served_run(tmp_path, skill, model, env)
        try:
            redirect = f"{served.url}/mcp-auth/callback"
            peer.preregister("pizzabot-at-hubspot", "hubspot-secret", redirect)
            connect = await pending_item(served, run_id)
            assert connect["kind"] == "question"
            browser = httpx.AsyncClient(verify=peer.certs.client_context(), follow_redirects=True)
            async with browser:
                page = await browser.get(connect["args"]["url"])
            assert page.status_code == 200 and page.text.startswith("Connected."), page.text
            item = await item_for(served, run_id, "crm.manage_crm_objects")
            assert item["args"] == {"createRequest": {"objects": [note]}}
            assert peer.created == []  # nothing written before a person said so
            async with served.client() as c:
                r = await c.post(f"/api/items/{item['id']}/decision", json={"decision": "approve"})
                assert r.status_code == 200, r.text
            run = await finished(served, run_id)
        finally:
            served.stop()
    assert run["status"] == "done", run
    assert peer.created == [note]
    assert "Ann Lee" in json.dumps(run["events"])  # the search ran without asking
    assert list(peer.provider.clients) == ["pizzabot-at-hubspot"]  # it never registered itself
