"""Decision links in item mails: opening one decides nothing, only the confirm form's POST
does; a link works once, for its own item and decision, until it expires."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Iterator
from datetime import timedelta
from email.message import EmailMessage
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI

from pizzabot.agent.model import ItemStatus
from pizzabot.agent.skills import StepUpFor
from pizzabot.channels.email.keys import MailKey
from pizzabot.channels.email.links import links_router, sign_link
from tests.peers.email_bot import ALICE, MALLORY, PROPOSED, USERS, EmailBot, email_skill
from tests.peers.mailserver import MailServer
from tests.peers.required import require

pytestmark = pytest.mark.mail

PUBLIC = "https://pizzabot.example.test"


@pytest.fixture(scope="module")
def mail() -> Iterator[MailServer]:
    require("mail")
    with MailServer(users=USERS) as server:
        yield server


@pytest.fixture
async def bot(mail: MailServer, tmp_path: Path) -> AsyncIterator[EmailBot]:
    skill = email_skill(deliver={"email": [ALICE, MALLORY]})
    async with EmailBot(mail, tmp_path, skill=skill, public_url=PUBLIC) as running:
        yield running


@pytest.fixture
async def web(bot: EmailBot) -> AsyncIterator[httpx.AsyncClient]:
    app = FastAPI()
    app.include_router(links_router(lambda _request: bot.links))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url=PUBLIC) as client:
        yield client


def links_in(msg: EmailMessage) -> dict[str, str]:
    body = msg.get_body(("plain",))
    assert isinstance(body, EmailMessage)
    found = dict(re.findall(r"^\s+(Approve|Reject|Edit):\s+(\S+)\r?$", body.get_content(), re.M))
    html = msg.get_body(("html",))
    assert isinstance(html, EmailMessage)
    for url in found.values():
        assert url.startswith(PUBLIC + "/mail/d/")
        assert url in html.get_content()
    return {k.lower(): v.removeprefix(PUBLIC) for k, v in found.items()}


async def test_opening_a_link_decides_nothing_the_form_does_once(
    bot: EmailBot, web: httpx.AsyncClient
) -> None:
    item = await bot.action()
    got = await bot.mail_for(item.id)
    links = links_in(got)
    assert set(links) == {"approve", "reject", "edit"}
    assert f"{PUBLIC}/items/{item.id}" in str(got.get_body(("plain",)).get_content())  # type: ignore[union-attr]

    for _ in range(3):  # a scanner, a preview, the person
        page = await web.get(links["approve"])
        assert page.status_code == 200 and "<form method='post'>" in page.text
        assert page.headers["cache-control"] == "no-store"
    assert (await bot.store.get_item(item.id)).status is ItemStatus.PENDING

    done = await web.post(links["approve"])
    assert done.status_code == 200 and f"Approved by {ALICE} via email" in done.text
    decided = await bot.store.get_item(item.id)
    assert (decided.status, decided.decided_by, decided.decided_via) == (
        ItemStatus.APPROVED,
        ALICE,
        "email",
    )

    again = await web.post(links["approve"])
    assert again.status_code == 410 and "already used" in again.text
    assert (await web.get(links["approve"])).status_code == 410
    # Another decision's link for the decided item says who was first.
    other = await web.post(links["reject"], data={"reason": "late"})
    assert other.status_code == 409 and "Approved by" in other.text


async def test_reject_link_carries_the_reason(bot: EmailBot, web: httpx.AsyncClient) -> None:
    item = await bot.action()
    links = links_in(await bot.mail_for(item.id))
    page = await web.get(links["reject"])
    assert "name='reason'" in page.text
    await web.post(links["reject"], data={"reason": "not this week"})
    decided = await bot.store.get_item(item.id)
    assert (decided.status, decided.reason) == (ItemStatus.REJECTED, "not this week")


async def test_edit_link_shows_the_form_and_its_errors(
    bot: EmailBot, web: httpx.AsyncClient
) -> None:
    item = await bot.action()
    links = links_in(await bot.mail_for(item.id))
    page = await web.get(links["edit"])
    assert "name='copies'" in page.text and "value='1'" in page.text
    form = {k: str(v) for k, v in PROPOSED.items()} | {"priority": "normal"}

    bad = await web.post(links["edit"], data=form | {"copies": "11"})
    assert bad.status_code == 200 and "class='err'" in bad.text and "value='11'" in bad.text
    assert (await bot.store.get_item(item.id)).status is ItemStatus.PENDING

    good = await web.post(links["edit"], data=form | {"copies": "4"})
    assert good.status_code == 200 and "Edited and approved" in good.text
    decided = await bot.store.get_item(item.id)
    assert decided.status is ItemStatus.EDITED
    assert decided.final_args == {**PROPOSED, "copies": 4, "priority": "normal"}


async def test_non_approvers_get_no_links_and_forged_or_old_links_fail(
    bot: EmailBot, web: httpx.AsyncClient
) -> None:
    item = await bot.action()
    assert links_in(await bot.mail_for(item.id, user="mallory", password="mallory-pw")) == {}

    # A link made out with any key but the server's fails the signature.
    forged = sign_link(
        MailKey(MailKey.generate()),
        item,
        decision="approve",
        address=ALICE,
        expires=bot.ctx.clock() + timedelta(days=1),
    )
    assert (await web.post(f"/mail/d/{forged}")).status_code == 410

    expired = sign_link(
        bot.key,
        item,
        decision="approve",
        address=ALICE,
        expires=bot.ctx.clock() - timedelta(seconds=1),
    )
    page = await web.get(f"/mail/d/{expired}")
    assert page.status_code == 410 and "expired" in page.text
    assert (await web.post(f"/mail/d/{expired}")).status_code == 410

    # A link the server signed for someone who is not an approver still cannot decide.
    outsider = sign_link(
        bot.key,
        item,
        decision="approve",
        address=MALLORY,
        expires=bot.ctx.clock() + timedelta(days=1),
    )
    refused = await web.post(f"/mail/d/{outsider}")
    assert refused.status_code == 403
    assert (await bot.store.get_item(item.id)).status is ItemStatus.PENDING


async def test_a_link_alone_cannot_approve_a_call_that_needs_a_passkey(
    mail: MailServer, tmp_path: Path
) -> None:
    """The skill asks for a passkey on irreversible calls: the mail's Approve link decides
    nothing and says where to confirm it; Reject still works from the mail."""
    skill = email_skill(step_up=StepUpFor(passkey=["irreversible"]))
    async with EmailBot(mail, tmp_path, skill=skill, public_url=PUBLIC) as bot:
        app = FastAPI()
        app.include_router(links_router(lambda _request: bot.links))
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url=PUBLIC) as web:
            item = await bot.action()
            links = links_in(await bot.mail_for(item.id))
            refused = await web.post(links["approve"])
            assert refused.status_code == 403
            assert "Confirm with your passkey" in refused.text
            assert "needs a passkey" in refused.text and "open the card" in refused.text
            assert (await bot.store.get_item(item.id)).status is ItemStatus.PENDING
            rejected = await web.post(links["reject"], data={"reason": "not by mail"})
            assert rejected.status_code == 200
            assert (await bot.store.get_item(item.id)).status is ItemStatus.REJECTED
