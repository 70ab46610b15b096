"""The example skills that talk to hosted services complete a run, served by a real
`pizzabot serve` with the scripted model; their asks are answered through the API. No byte
leaves this machine: each service is a local peer the real client is pointed at.

- slack-summary: korotovsky's `slack-mcp-server` (the Go binary from npm, installed by
  `.ci/install-mcp-servers`) with the example's own environment, plus a proxy and a CA: it
  calls `https://slack.com/api/...` as it would for anyone, and `tests/peers/slack_proxy.py`
  ends that TLS and answers from the Slack Web API fake. The model reads the channel's day
  (at once), tries to post a summary that pings @here (refused by the skill's rule, unasked),
  then posts a plain one (asked); approved, the fake records the `chat.postMessage`.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from pizzabot.agent.testing.model_server import ScriptedModelServer
from pizzabot.agent.testing.scripts import Reply, ToolCall, turns
from tests.e2e.test_example_runs import EXAMPLES, finished, pending_item, served_run
from tests.peers.required import NPM_BIN
from tests.peers.slack_api import SlackApi
from tests.peers.slack_proxy import SlackProxy

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
