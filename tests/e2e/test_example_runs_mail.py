"""The new-lead and meeting-prep examples complete a run: each example's file as shipped, with
only its model swapped for the scripted one and its server started from this environment's
install (not `uvx`, which would download it) and pointed at local peers, served by a real
`pizzabot serve`; its asks are answered through the API.

- new-lead: a signed webhook brings a lead's form; the model saves a welcome email as a draft
  (auto), tries to send it with an attachment (denied by the skill's rule, without asking),
  then sends it plainly (asked). Approved, the real `mcp-email-server` (from its own venv,
  `.ci/install-mcp-servers`) sends it over STARTTLS with a login to the mail peer (dovecot
  behind an SMTP front), verifying the peer's certificate against the test CA, and the lead
  finds it in their inbox.
- meeting-prep: the model lists and reads the notes folder (auto, Pizza Bot's own files
  server), tries a URL with a query string (denied without asking), then fetches the
  company's page (asked, approved). The reference fetch server asks a local proxy that serves
  the page: it looks up the reserved `.example` name first (which no DNS answers) and then
  never connects to it. The briefing it writes into the drafts folder runs at once and puts an
  FYI in Unread.
"""

from __future__ import annotations

import json
import re
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from pizzabot.agent.skills import StdioServer, load_skills
from pizzabot.agent.testing.model_server import ScriptedModelServer
from pizzabot.agent.testing.scripts import (
    Message,
    Reply,
    ToolCall,
    count_role,
    last_tool_result,
    turns,
)
from pizzabot.agent.tools_mcp import ToolHub
from pizzabot.channels.triggers.hooks import sign
from tests.e2e.test_example_runs import (
    EXAMPLES,
    as_shipped,
    finished,
    pending_item,
    served_run,
)
from tests.peers.mailserver import MailServer
from tests.peers.required import PYPI_BIN
from tests.peers.server import ServerProcess
from tests.peers.web_proxy import WebProxy
from tests.waiting import eventually

LOCK = Path(__file__).resolve().parents[2] / ".ci" / "mcp-servers" / "requirements.lock"
HOOK_SECRET = "new-lead-hook-secret-0123456789"
SALES = {"sales": "sales-pw", "ann": "ann-pw"}
SUBJECT = "Welcome to Example, Ann"
BODY = "Hi Ann,\n\nThanks for writing to us. We will call you on Tuesday.\n\nThe sales team"


def shipped_mail_server() -> dict[str, Any]:
    server: dict[str, Any] = yaml.safe_load((EXAMPLES / "new-lead.yaml").read_text())[
        "mcp_servers"
    ]["mail"]
    return server


def on_peer(mail: MailServer, home: Path) -> dict[str, Any]:
    """The example's mail server as shipped, its fences and secrets kept, started from the venv
    and pointed at the mail peer: its hosts and ports, its CA, its folder names; and `home` for
    the index it keeps under ~/.config."""
    shipped = shipped_mail_server()
    package, *args = shipped["args"]
    pinned = re.search(r"^mcp-email-server==\S+", LOCK.read_text(), re.M)
    assert pinned is not None and package == pinned.group(0)  # the tests run what users get
    env = {
        **shipped["env"],
        "MCP_EMAIL_SERVER_EMAIL_ADDRESS": mail.address("sales"),
        "MCP_EMAIL_SERVER_IMAP_HOST": mail.host,
        "MCP_EMAIL_SERVER_IMAP_PORT": str(mail.imaps_port),
        "MCP_EMAIL_SERVER_SMTP_HOST": mail.host,
        "MCP_EMAIL_SERVER_SMTP_PORT": str(mail.smtp_port),
        # The peer's folders carry no special-use flags for the server to find them by.
        "MCP_EMAIL_SERVER_DRAFTS_MAILBOX": "Drafts",
        "MCP_EMAIL_SERVER_SENT_FOLDER_NAME": "Sent",
        "SSL_CERT_FILE": str(mail.certs.ca_file),
        "HOME": str(home),
    }
    return {**shipped, "command": str(PYPI_BIN / "mcp-email-server"), "args": args, "env": env}


async def make_folders(mail: MailServer, user: str, *names: str) -> None:
    client = await mail.connect_imap(user, mail.users[user])
    try:
        for name in names:
            assert (await client.create(name)).result == "OK"
    finally:
        await client.logout()


async def post_hook(server: ServerProcess, name: str, form: dict[str, str]) -> str:
    body = json.dumps(form).encode()
    stamp = str(int(time.time()))
    headers = {
        "Content-Type": "application/json",
        "X-Pizzabot-Timestamp": stamp,
        "X-Pizzabot-Signature": sign(HOOK_SECRET, stamp, body),
    }
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as c:  # no API token
        r = await c.post(f"/hooks/{name}", content=body, headers=headers)
    assert r.status_code == 202, r.text
    return str(r.json()["run_id"])


@pytest.mark.mail
@pytest.mark.pypi
async def test_new_lead_lists_the_mail_servers_tools_and_gives_each_a_policy(
    tmp_path: Path,
) -> None:
    async with MailServer(users=SALES, tls=True) as mail:
        skill = load_skills(EXAMPLES).skills["new-lead"]
        peer = StdioServer.model_validate(on_peer(mail, tmp_path))
        hub = ToolHub(env={"PATH": "/usr/bin:/bin", "MCP_EMAIL_SERVER_PASSWORD": "sales-pw"})
        lead = skill.model_copy(update={"mcp_servers": {"mail": peer}})
        try:
            specs = await hub.list_tools(lead)  # checks the rules against the tools' arguments
            deleted = await hub.call(lead, "mail", "delete_emails", {"account_name": "default", "email_ids": ["1"]})  # fmt: skip
        finally:
            await hub.aclose()
    names = {s.name for s in specs}
    assert {"save_draft", "send_email", "forward_email", "delete_emails"} <= names
    assert skill.rule("mail.send_email").policy == "ask"
    assert skill.rule("mail.save_draft").policy == "auto"
    refused = {n for n in names if skill.rule(f"mail.{n}").policy == "deny"}
    assert refused == names - {f.split(".", 1)[1] for f in skill.tools if f != "*"}
    # Past this skill's policies, the server's own fence holds: no deleting on this account.
    assert deleted.is_error and "'delete' is not allowed" in deleted.text


@pytest.mark.mail
@pytest.mark.pypi
async def test_new_lead_sends_the_welcome_email_once_a_sales_person_approves(
    tmp_path: Path,
) -> None:
    async with MailServer(users=SALES, tls=True) as mail:
        await make_folders(mail, "sales", "Drafts", "Sent")
        welcome = {
            "account_name": "default",
            "recipients": [mail.address("ann")],
            "subject": SUBJECT,
            "body": BODY,
        }
        attached = {**welcome, "attachments": ["/srv/sales/prices.pdf"]}
        script = turns(
            Reply(tool_calls=[ToolCall("mail__save_draft", welcome)]),
            Reply(tool_calls=[ToolCall("mail__send_email", attached)]),
            Reply(tool_calls=[ToolCall("mail__send_email", welcome)]),
            Reply(text="Sent Ann a welcome email."),
        )
        async with ScriptedModelServer(script) as model:
            skill = as_shipped("new-lead", model.openai_base, on_peer(mail, tmp_path))
            skills = tmp_path / "skills"
            skills.mkdir()
            (skills / "new-lead.yaml").write_text(yaml.safe_dump(skill))
            env = {"MCP_EMAIL_SERVER_PASSWORD": "sales-pw", "NEW_LEAD_SECRET": HOOK_SECRET}
            server = ServerProcess(data_dir=tmp_path / "data", skills_dir=skills, env=env)
            await server.start()
            try:
                form = {"name": "Ann", "email": mail.address("ann"), "company": "Acme"}
                run_id = await post_hook(server, "new-lead", form)
                item = await pending_item(server, run_id)
                assert item["tool"] == "mail.send_email" and item["args"] == welcome
                # Drafted at once; nothing sent before a person said so.
                drafts = await mail.fetch_all("sales", "sales-pw", "Drafts")
                assert [str(m["Subject"]) for m in drafts] == [SUBJECT]
                assert await mail.fetch_all("ann", "ann-pw") == []
                async with server.client() as c:
                    body = {"decision": "approve"}
                    r = await c.post(f"/api/items/{item['id']}/decision", json=body)
                    assert r.status_code == 200, r.text
                run = await finished(server, run_id)
            finally:
                server.stop()
        assert run["status"] == "done", run
        got = await mail.wait_for_mail("ann", "ann-pw", lambda m: m["Subject"] == SUBJECT)
        inbox = await mail.fetch_all("ann", "ann-pw")
        sent = await mail.fetch_all("sales", "sales-pw", "Sent")
    assert len(inbox) == 1  # one email, and not the one with an attachment
    assert mail.address("sales") in str(got["From"]) and not got.is_multipart()
    assert got.get_content().strip() == BODY
    assert [str(m["Subject"]) for m in sent] == [SUBJECT]
    assert "a welcome email goes without attachments" in json.dumps(run["events"])


NEWS = "http://acme.example/news"
PAGE = """<html><head><title>Acme news</title></head><body><article>
<h1>Acme news</h1>
<p>Acme opens a second plant in Tilburg this spring, doubling its output of bicycle frames.
The plant will employ two hundred people and run on solar power from its own roof.</p>
<p>Ann Lee, Acme's chief technology officer, leads the move to the new site.</p>
</article></body></html>"""
NOTES = "10:00 Acme, with Ann Lee (CTO). Their news page: http://acme.example/news\n"


def meeting_prep_script(messages: list[Message], tools: list[dict[str, Any]]) -> Reply:
    """Reads the notes, tries a search URL, fetches the news page, and writes the briefing
    from what the fetch returned."""
    steps = [
        ToolCall("files__list_dir", {"path": "notes"}),
        ToolCall("files__read_file", {"path": "notes/2026-12-03-acme.md"}),
        ToolCall("fetch__fetch", {"url": "http://acme.example/search?q=Ann+Lee"}),
        ToolCall("fetch__fetch", {"url": NEWS}),
    ]
    n = count_role(messages, "assistant")
    if n < len(steps):
        return Reply(tool_calls=[steps[n]])
    if n == len(steps):
        briefing = f"# Acme, 10:00\n\nNews ({NEWS}):\n{last_tool_result(messages)}\n"
        path = "drafts/2026-12-03-acme.md"
        return Reply(
            tool_calls=[ToolCall("files__write_file", {"path": path, "content": briefing})]
        )
    return Reply(text="The briefing for Acme is in drafts.")


async def test_meeting_prep_reads_notes_fetches_once_approved_and_writes_the_briefing(
    tmp_path: Path,
) -> None:
    notes, drafts = tmp_path / "notes", tmp_path / "drafts"
    notes.mkdir()
    drafts.mkdir()
    (notes / "2026-12-03-acme.md").write_text(NOTES)
    async with WebProxy({NEWS: PAGE}) as web:
        fetch = {
            "command": str(Path(sys.executable).parent / "mcp-server-fetch"),
            "args": ["--proxy-url", web.url],
        }
        async with ScriptedModelServer(meeting_prep_script) as model:
            skill = as_shipped("meeting-prep", model.openai_base, fetch)
            skill["folders"] = [{"path": str(notes)}, {"path": str(drafts), "write": True}]
            server, run_id = await served_run(tmp_path, skill, model, {})
            try:
                item = await pending_item(server, run_id)
                assert item["tool"] == "fetch.fetch" and item["args"] == {"url": NEWS}
                assert web.requested == []  # nothing fetched before a person said so
                async with server.client() as c:
                    r = await c.post(f"/api/items/{item['id']}/decision", json={"decision": "approve"})  # fmt: skip
                    assert r.status_code == 200, r.text
                run = await finished(server, run_id)
                async with server.client() as c:

                    async def told() -> list[dict[str, Any]]:
                        r = await c.get("/api/inbox", params={"box": "unread"})
                        items = [i for i in r.json()["items"] if i["run_id"] == run_id]
                        return [i for i in items if i["title"].startswith("FYI")]

                    fyi = await eventually(told, what="the FYI of the write", context=server.log)
            finally:
                server.stop()
    assert run["status"] == "done", run
    assert web.requested == ["http://acme.example/robots.txt", NEWS]
    briefing = (drafts / "2026-12-03-acme.md").read_text()
    assert "second plant in Tilburg" in briefing
    assert "no query strings" in json.dumps(run["events"])
    assert [i["title"] for i in fyi] == ["FYI: meeting-prep ran files.write_file"]
