"""A mail's decision links count only for the call that mail showed, against a real
`pizzabot serve` process and the real SMTP + IMAP peer.

The attack: Carol gets a deploy's mail, with its one-time Approve and Edit links; Bob then
edits the call. Her links, made for the call as it was, must decide nothing: opening one
says the card changed, using one is refused (and audited), and the thread gets the call as
it is now, to which her answer does count.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Iterator
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import aiosmtplib
import httpx
import pytest
import pytest_asyncio
import yaml

from tests.e2e.test_email_e2e import env as mail_env
from tests.peers.email_bot import reply_to
from tests.peers.mailserver import MailServer
from tests.peers.required import require
from tests.peers.server import ServerProcess
from tests.waiting import eventually

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.mail]

PUBLIC = "http://pizzabot.test"  # the public URL `mail_env` gives the server
CAROL = "carol@example.test"
USERS = {"bot": "bot-pw", "carol": "carol-pw"}
DEPLOYS = {
    "name": "deploys",
    "people": {"bob": {"email": "bob@example.test"}, "carol": {"email": CAROL}},
    "approvers": ["bob", "carol"],
    "deliver": {"email": [CAROL]},
    "tools": {"deploy.prod": {"policy": "ask", "approvals": {"required": 2}}},
}
SCHEMA = {
    "type": "object",
    "properties": {"version": {"type": "string"}, "env": {"type": "string"}},
    "required": ["version", "env"],
}
BOBS_EDIT = {"version": "6.6.6-backdoor", "env": "prod"}


@pytest.fixture(scope="module")
def mail() -> Iterator[MailServer]:
    require("mail")
    with MailServer(users=USERS) as server:
        yield server


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def server(
    mail: MailServer, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[ServerProcess]:
    root: Path = tmp_path_factory.mktemp("card-seen-mail")
    skills = root / "skills"
    skills.mkdir()
    (skills / "deploys.yaml").write_text(yaml.safe_dump(DEPLOYS))
    proc = ServerProcess(data_dir=root / "data", skills_dir=skills, env=mail_env(mail))
    await proc.start()
    try:
        yield proc
    finally:
        proc.stop()


async def token(server: ServerProcess, name: str, scope: str, person: str | None = None) -> str:
    body = {"name": name, "scope": scope, **({"person": person} if person else {})}
    async with server.client() as c:
        r = await c.post("/api/tokens", json=body)
    assert r.status_code == 201, r.text
    return str(r.json()["token"])


async def item_now(server: ServerProcess, item_id: str) -> dict[str, Any]:
    async with server.client() as c:
        r = await c.get(f"/api/items/{item_id}")
    assert r.status_code == 200, r.text
    item: dict[str, Any] = r.json()
    return item


def plain(msg: EmailMessage) -> str:
    part = msg.get_body(("plain",))
    assert isinstance(part, EmailMessage)
    return str(part.get_content())


def links_in(msg: EmailMessage) -> dict[str, str]:
    """The mail's decision links by decision, as paths on the server."""
    found = re.findall(r"^\s+(Approve|Reject|Edit):\s+(\S+)\r?$", plain(msg), re.M)
    assert found, plain(msg)
    return {name.lower(): url.removeprefix(PUBLIC) for name, url in found}


async def carols_card(mail: MailServer, item_id: str, showing: str) -> EmailMessage:
    """Carol's mail of the item that shows `showing` and has decision links: a card."""
    return await mail.wait_for_mail(
        "carol",
        USERS["carol"],
        lambda m: m["X-Pizzabot-Item"] == item_id and showing in plain(m) and _linked(m),
        timeout=30,
    )


async def carols_mail(mail: MailServer, item_id: str, showing: str) -> EmailMessage:
    return await mail.wait_for_mail(
        "carol",
        USERS["carol"],
        lambda m: m["X-Pizzabot-Item"] == item_id and showing in plain(m),
        timeout=30,
    )


def _linked(msg: EmailMessage) -> bool:
    return bool(re.search(r"^\s+Approve:\s+\S+\r?$", plain(msg), re.M))


async def test_a_mails_links_from_before_an_edit_decide_nothing_after_it(
    server: ServerProcess, mail: MailServer
) -> None:
    agent = await token(server, "ship-agent", "ask")
    body = {
        "skill": "deploys",
        "title": "Ship 1.2.3",
        "tool": "deploy.prod",
        "args": {"version": "1.2.3", "env": "staging"},
        "schema": SCHEMA,
    }
    async with server.client(agent) as c:
        r = await c.post("/api/requests", json=body)
    assert r.status_code == 201, r.text
    item = await item_now(server, str(r.json()["item_id"]))
    got = await carols_card(mail, item["id"], "1.2.3")
    assert f"Requested by: {item['requested_by']}" in plain(got)
    old = links_in(got)
    assert set(old) == {"approve", "reject", "edit"}

    bob = await token(server, "bob-cli", "decide", person="bob")
    async with server.client(bob) as c:
        r = await c.post(
            f"/api/items/{item['id']}/decision", json={"decision": "edit", "args": BOBS_EDIT}
        )
    assert r.status_code == 200 and r.json()["version"] == 2, r.text
    digest = r.json()["digest"]

    async with httpx.AsyncClient(base_url=server.url, follow_redirects=False) as web:
        page = await web.get(old["approve"])
        assert page.status_code == 409 and "This card changed" in page.text
        approved = await web.post(old["approve"])
        assert approved.status_code == 409 and "This card changed" in approved.text
        edited = await web.post(old["edit"], data={"version": "1.2.4", "env": "staging"})
        assert edited.status_code == 409 and "This card changed" in edited.text

    now = await item_now(server, item["id"])
    assert now["status"] == "pending" and now["args"] == BOBS_EDIT
    assert now["risk"]["approved"] == ["bob via the API"] and now["digest"] == digest
    async with server.client() as c:
        entries = (await c.get("/api/audit", params={"limit": 1000})).json()["items"]
    refused = [e for e in entries if e["item_id"] == item["id"]]
    refused = [e for e in refused if e["action"] == "decision_refused"]
    assert [e["actor"] for e in refused] == [CAROL, CAROL]
    assert all("card changed" in e["detail"]["why"] for e in refused)

    # The thread shows the call as it is now, and an answer to that mail counts.
    newest = await carols_mail(mail, item["id"], "6.6.6-backdoor")
    assert "1 of 2 approved: bob via the API" in plain(newest)
    reply = reply_to(newest, "approve", sender=f"Carol <{CAROL}>")
    await aiosmtplib.send(reply, hostname=mail.host, port=mail.smtp_port)

    async def decided() -> dict[str, Any] | None:
        now = await item_now(server, item["id"])
        return now if now["status"] == "edited" else None

    final = await eventually(decided, what="the edited call approved", context=server.log)
    assert final["final_args"] == BOBS_EDIT
    assert final["risk"]["approved"] == ["bob via the API", "carol via email"]
