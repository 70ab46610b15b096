"""Whoever holds a copy of an item mail can decide only as that copy's own approver.

The attack: Mallory is on an item's `deliver.email` list. From everything her copy carries
(the `Reply-To` plus-address, the `Message-ID`, any link), she mints a decision link "approve
as alice@" valid for years, or writes a reply "From: alice@" with her copy's token. Both used
to decide, because links and tokens were made from the item's secret, which every copy
carried. Now links are signed with a key that never leaves the server, and a reply token is
per recipient: her copy proves nothing about Alice. Real SMTP + IMAP (dovecot), the real
outbox, inbound handler and link routes.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
import time
from collections.abc import AsyncIterator, Iterator
from email.message import EmailMessage
from email.utils import make_msgid
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI
from itsdangerous import URLSafeSerializer

from pizzabot.agent.model import ItemStatus
from pizzabot.bot.server import create_app
from pizzabot.bot.settings import Settings
from pizzabot.channels.email.links import links_router
from tests.peers.email_bot import (
    ALICE,
    MALLORY,
    MALLORY_PW,
    USERS,
    EmailBot,
    email_skill,
    send,
    verified,
)
from tests.peers.mailserver import MailServer
from tests.peers.required import require

pytestmark = pytest.mark.mail

PUBLIC = "https://pizzabot.example.test"


@pytest.fixture(scope="module")
def mail() -> Iterator[MailServer]:
    require("mail")
    with MailServer(users=USERS) as server:
        yield server


def _web(bot: EmailBot) -> httpx.AsyncClient:
    app = FastAPI()
    app.include_router(links_router(lambda _request: bot.links))
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=PUBLIC)


def _candidates(copy: EmailMessage) -> set[str]:
    """Every string in a copy of the mail that could be a key: plus-address details,
    Message-ID parts, path segments of links."""
    raw = copy.as_string()
    found = set(re.findall(r"\+([A-Za-z0-9_\-]+)@", raw))
    for mid in re.findall(r"<([^<>\s]+)>", raw):
        found.update(mid.split("@")[0].split("."))
    found.update(re.findall(r"/mail/d/([^\s\"'<>]+)", raw))
    return {c for c in found if len(c) >= 8}


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _forgeries(secret: str, item_id: str) -> list[str]:
    """ "Approve as Alice until 2100", signed with `secret` every way the source shows."""
    claim = {"i": item_id, "d": "approve", "a": ALICE, "e": int(time.time()) + 75 * 365 * 86400}
    payload = _b64(json.dumps(claim, separators=(",", ":")).encode())
    mac = _b64(hmac.new(secret.encode(), payload.encode(), hashlib.sha256).digest()[:20])
    derived = hmac.new(secret.encode(), b"pizzabot/mail/link", hashlib.sha256).digest()
    signed = URLSafeSerializer(
        derived,
        salt="pizzabot.mail.decision-link",
        signer_kwargs={"digest_method": hashlib.sha256},
    ).dumps(claim)
    return [f"{payload}.{mac}", signed]


@pytest.fixture
async def bot(mail: MailServer, tmp_path: Path) -> AsyncIterator[EmailBot]:
    # Mallory gets every item by mail but may not decide.
    skill = email_skill(deliver={"email": [ALICE, MALLORY]})
    async with EmailBot(mail, tmp_path, skill=skill, public_url=PUBLIC) as running:
        yield running


async def test_a_non_approvers_copy_cannot_mint_a_link_for_an_approver(bot: EmailBot) -> None:
    item = await bot.action()
    copy = await bot.mail_for(item.id, user="mallory", password=MALLORY_PW)
    assert "/mail/d/" not in copy.as_string()
    forged = [f for c in _candidates(copy) for f in _forgeries(c, item.id)]
    assert forged, "the copy should carry something to try"
    async with _web(bot) as web:
        for link in forged:
            answer = await web.post(f"/mail/d/{link}")
            assert answer.status_code == 410, answer.text
    assert (await bot.store.get_item(item.id)).status is ItemStatus.PENDING


async def test_a_non_approvers_copy_carries_no_token_a_reply_as_the_approver_can_use(
    mail: MailServer, bot: EmailBot
) -> None:
    item = await bot.action()
    copy = await bot.mail_for(item.id, user="mallory", password=MALLORY_PW)
    assert copy["Reply-To"].addresses[0].addr_spec == bot.address
    spoof = _spoofed_reply(copy, to=copy["Reply-To"].addresses[0].addr_spec)
    await send(mail, spoof)
    outcome = await bot.next_outcome()
    assert outcome.startswith("refused: ") and "token" in outcome
    assert (await bot.store.get_item(item.id)).status is ItemStatus.PENDING


async def test_an_approvers_token_cannot_decide_as_another_approver(
    mail: MailServer, tmp_path: Path
) -> None:
    # Both may decide; Mallory writes "From: Alice" with her own copy's token.
    skill = email_skill(deliver={"email": [ALICE, MALLORY]}, approvers={"email": [ALICE, MALLORY]})
    async with EmailBot(mail, tmp_path, skill=skill) as bot:
        item = await bot.action()
        copy = await bot.mail_for(item.id, user="mallory", password=MALLORY_PW)
        await send(mail, _spoofed_reply(copy, to=copy["Reply-To"].addresses[0].addr_spec))
        outcome = await bot.next_outcome()
        assert outcome.startswith("refused: ") and "token" in outcome
        assert (await bot.store.get_item(item.id)).status is ItemStatus.PENDING


async def test_no_link_route_without_a_public_url(mail: MailServer, tmp_path: Path) -> None:
    settings = Settings(
        data_dir=tmp_path,
        email_from="bot@example.test",
        smtp_host=mail.host,
        smtp_port=mail.smtp_port,
        smtp_tls="none",
        public_url=None,
        worker=False,
        scheduler=False,
        otel=False,
    )
    app = create_app(settings, token="t" * 32, with_worker=False)
    transport = httpx.ASGITransport(app=app)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client,
    ):
        for method in ("GET", "POST"):
            answer = await client.request(method, "/mail/d/eyJpIjoiMSJ9.c2ln")
            assert answer.status_code == 404
            assert "form" not in answer.text and "link" not in answer.text.lower()
    key = tmp_path / "mail-key"
    assert key.exists() and key.stat().st_mode & 0o777 == 0o600


def _spoofed_reply(copy: EmailMessage, *, to: str) -> EmailMessage:
    msg = EmailMessage()
    msg["From"] = f"Alice Example <{ALICE}>"
    msg["To"] = to
    msg["Subject"] = f"Re: {copy['Subject']}"
    msg["Message-ID"] = make_msgid(domain="example.test")
    msg["In-Reply-To"] = str(copy["Message-ID"])
    msg["References"] = str(copy["Message-ID"])
    msg.set_content("approve\n")
    # Mallory sends from a mailbox of the same domain: DMARC for example.test passes, so
    # only the token can tell her from Alice.
    return verified(msg)
