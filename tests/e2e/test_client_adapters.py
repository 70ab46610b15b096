"""The framework adapters end to end: each example agent in manifests/examples/agents (a real
LangGraph, pydantic-ai or OpenAI Agents SDK agent, its model the scripted model server over
the OpenAI protocol) runs as its own process against a real `pizzabot serve`. It pauses on
`send_email`; a person decides on Slack (a signed modal submission to the Slack endpoint), by
email (a reply through the SMTP/IMAP peer) or on the web page; the agent resumes with that
decision, and its tool runs with the edited arguments, as proposed, or not at all."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import aiosmtplib
import httpx
import pytest
import yaml

from tests.peers.email_bot import AUTHSERV_ID, reply_to
from tests.peers.mailserver import DEFAULT_USERS, MailServer
from tests.peers.required import require
from tests.peers.server import TOKEN, ServerProcess
from tests.peers.slack_api import (
    SlackApi,
    block_actions,
    field_blocks,
    filled_values,
    http_mode_env,
    post_interaction,
    view_submission,
)
from tests.peers.web import csrf_of
from tests.waiting import eventually

EXAMPLES = Path(__file__).resolve().parents[2] / "manifests" / "examples" / "agents"
SKILL: dict[str, Any] = {
    "name": "agents",
    "description": "the example agents' tool calls",
    "tools": {"send_email": {"policy": "ask", "impact": "medium", "reversible": False}},
}
SECRET = "adapters-slack-signing-secret-0123"
APPROVER = "U1"
ALICE = "alice@example.test"


@asynccontextmanager
async def pizzabot(
    root: Path, skill: dict[str, Any], env: dict[str, str]
) -> AsyncIterator[ServerProcess]:
    skills = root / "skills"
    skills.mkdir(parents=True)
    (skills / "agents.yaml").write_text(yaml.safe_dump({**SKILL, **skill}))
    server = ServerProcess(data_dir=root / "data", skills_dir=skills, env=env)
    await server.start()
    try:
        yield server
    finally:
        server.stop()


class Example:
    """One example agent as its own process: what it printed, and its exit code."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc

    async def finished(self) -> list[str]:
        """The lines it printed, once it exits (it must exit 0)."""
        out, err = await asyncio.wait_for(self.proc.communicate(), 120)
        assert self.proc.returncode == 0, err.decode()[-3000:]
        return out.decode().splitlines()


async def start_example(name: str, server: ServerProcess) -> Example:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    env.pop("PIZZABOT_API_TOKEN", None)
    async with server.client() as c:  # the agent asks with a token that can decide nothing
        made = await c.post("/api/tokens", json={"name": f"agent-{name[:40]}", "scope": "ask"})
    assert made.status_code == 201, made.text
    env.update(
        {
            "PIZZABOT_URL": server.url,
            "PIZZABOT_AGENT_TOKEN": made.json()["token"],
            "PIZZABOT_SKILL": "agents",
            "PYTHONUNBUFFERED": "1",
        }
    )
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(EXAMPLES / name),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
    )
    return Example(proc)


async def asked(server: ServerProcess) -> dict[str, Any]:
    """The example's request as an Action item (with its schema), once it is there."""
    async with server.client() as c:

        async def find() -> dict[str, Any] | None:
            items = (await c.get("/api/inbox", params={"box": "action"})).json()["items"]
            mine = [i for i in items if i["tool"] == "send_email" and i["status"] == "pending"]
            if not mine:
                return None
            item: dict[str, Any] = (await c.get(f"/api/items/{mine[0]['id']}")).json()
            return item

        return await eventually(find, what="the agent's request", timeout=90, context=server.log)


def ran(lines: list[str]) -> list[dict[str, Any]]:
    """The arguments the example's send_email really ran with, in order."""
    prefix = "send_email ran: "
    return [json.loads(line.removeprefix(prefix)) for line in lines if line.startswith(prefix)]


def said(lines: list[str]) -> str:
    """The agent's last words: everything from its `agent: ` line on."""
    start = next(n for n, line in enumerate(lines) if line.startswith("agent: "))
    return "\n".join(lines[start:]).removeprefix("agent: ")


async def test_langgraph_edited_in_a_slack_modal_runs_the_edited_call(tmp_path: Path) -> None:
    async with SlackApi() as slack:
        env = http_mode_env(slack.url, SECRET, PIZZABOT_PUBLIC_URL="http://pizza.example")
        skill = {"deliver": {"slack": "C123"}, "approvers": {"slack": [APPROVER]}}
        async with pizzabot(tmp_path, skill, env) as server:
            agent = await start_example("langgraph_agent.py", server)
            item = await asked(server)
            # The tool's own schema came along from LangGraph, so Slack offers an edit form.
            assert set(item["schema"]["properties"]) == {"to", "subject", "body"}
            [post] = await slack.wait_for(
                "chat.postMessage", lambda c: item["id"] in json.dumps(c.args.get("blocks"))
            )
            click = block_actions(
                action_id="pizza_edit",
                value=item["id"],
                user=APPROVER,
                channel=str(post.answer["channel"]),
                message_ts=str(post.answer["ts"]),
            )
            events = f"{server.url}/slack/events"
            assert (await post_interaction(events, click, secret=SECRET)).status_code == 200
            [opened] = await slack.wait_for(
                "views.open", lambda c: c.args.get("trigger_id") == click["trigger_id"]
            )
            view = opened.args["view"]
            ids = field_blocks(item)
            values = filled_values(view, **{ids["to"]: "bob@example.com"})
            submit = view_submission(view=view, user=APPROVER, values=values)
            r = await post_interaction(events, submit, secret=SECRET)
            assert r.status_code == 200 and not r.content, r.text
            lines = await agent.finished()
    assert ran(lines) == [
        {"to": "bob@example.com", "subject": "Quote", "body": "Here is the quote."}
    ]
    # The model is told its call was replaced, and what the edited one returned.
    assert "Executed instead: send_email" in said(lines)
    assert said(lines).endswith("sent to bob@example.com")


@pytest.fixture(scope="module")
def mail() -> Iterator[MailServer]:
    require("mail")
    with MailServer() as server:
        yield server


def mail_env(mail: MailServer) -> dict[str, str]:
    return {
        "PIZZABOT_EMAIL_FROM": "bot@example.test",
        "PIZZABOT_SMTP_HOST": mail.host,
        "PIZZABOT_SMTP_PORT": str(mail.smtp_port),
        "PIZZABOT_SMTP_TLS": "none",
        "PIZZABOT_IMAP_HOST": mail.host,
        "PIZZABOT_IMAP_PORT": str(mail.imap_port),
        "PIZZABOT_IMAP_TLS": "false",
        "PIZZABOT_IMAP_USER": "bot",
        "PIZZABOT_IMAP_PASSWORD": DEFAULT_USERS["bot"],
        "PIZZABOT_IMAP_BACKOFF_MAX": "1",
        "PIZZABOT_EMAIL_ALLOWED_SENDERS": ALICE,
        "PIZZABOT_EMAIL_AUTHSERV_ID": AUTHSERV_ID,
        "PIZZABOT_PUBLIC_URL": "http://pizzabot.test",
    }


@pytest.mark.mail
async def test_pydantic_ai_rejected_by_email_does_not_run_and_hears_why(
    mail: MailServer, tmp_path: Path
) -> None:
    skill = {"deliver": {"email": [ALICE]}, "approvers": {"email": [ALICE]}}
    async with pizzabot(tmp_path, skill, mail_env(mail)) as server:
        agent = await start_example("pydantic_ai_agent.py", server)
        item = await asked(server)
        card: EmailMessage = await mail.wait_for_mail(
            "alice",
            DEFAULT_USERS["alice"],
            lambda m: m["X-Pizzabot-Item"] == item["id"] and m["Reply-To"] is not None,
            timeout=30,
        )
        answer = reply_to(card, "reject: Ann already has the quote.\n\nThanks")
        await aiosmtplib.send(answer, hostname=mail.host, port=mail.smtp_port)
        lines = await agent.finished()
    assert ran(lines) == []
    assert said(lines) == (
        f"Done. The tool said: The call was rejected by {ALICE}: Ann already has the quote."
    )


async def test_openai_agents_approved_on_the_web_runs_the_call(tmp_path: Path) -> None:
    async with pizzabot(tmp_path, {}, {}) as server:
        agent = await start_example("openai_agents_agent.py", server)
        item = await asked(server)
        # The SDK's function tool schema is offered as the edit form.
        assert set(item["schema"]["properties"]) == {"to", "subject", "body"}
        async with httpx.AsyncClient(base_url=server.url, timeout=30) as web:
            assert (await web.get("/login", params={"token": TOKEN})).status_code == 303
            page = (await web.get(f"/items/{item['id']}")).text
            assert "ann@example.com" in page
            r = await web.post(
                f"/items/{item['id']}", data={"csrf": csrf_of(page), "decision": "approve"}
            )
            assert r.status_code == 303, r.text
        lines = await agent.finished()
        async with server.client() as c:
            decided = (await c.get(f"/api/items/{item['id']}")).json()
    assert decided["status"] == "approved" and decided["decided_via"] == "web"
    assert ran(lines) == [
        {"to": "ann@example.com", "subject": "Quote", "body": "Here is the quote."}
    ]
    assert said(lines) == "Done. The tool said: sent to ann@example.com"
