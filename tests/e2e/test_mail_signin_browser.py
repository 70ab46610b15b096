"""Signing in by a link in a mail, in headless Chromium against a real `pizzabot serve` that
mails through the local SMTP and IMAP peer: Alice, listed under `people:` with her address but
holding no token, asks for a link on the login page, follows it from her mailbox, sees and
decides her card, adds a passkey and signs in with it alone. The link works once; an address
nobody lists gets the same answer and no mail; the link is in no log.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Iterator
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from playwright.async_api import Browser, Page, async_playwright, expect

from tests.e2e.test_phone_browser import add_authenticator
from tests.e2e.test_web_browser import ARGS, send_then_quote, shoot
from tests.peers.mailserver import DEFAULT_USERS, MailServer
from tests.peers.required import CHROMIUM, require
from tests.peers.stack import Stack

pytestmark = [pytest.mark.mail, pytest.mark.browser, pytest.mark.asyncio(loop_scope="module")]

ALICE = "alice@example.test"
ALICE_PW = DEFAULT_USERS["alice"]
SENT = "If that address belongs to someone who may sign in here"
SKILL = {"people": {"alice": {"email": ALICE}}, "approvers": {"people": ["alice"]}}


@pytest.fixture(scope="module")
def mail() -> Iterator[MailServer]:
    require("mail")
    with MailServer() as server:
        yield server


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def stack(mail: MailServer, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Stack]:
    env = {
        "PIZZABOT_EMAIL_FROM": "bot@example.test",
        "PIZZABOT_SMTP_HOST": mail.host,
        "PIZZABOT_SMTP_PORT": str(mail.smtp_port),
        "PIZZABOT_SMTP_TLS": "none",
    }
    root = tmp_path_factory.mktemp("mail-signin")
    async with Stack(root, script=send_then_quote, skill=SKILL, env=env) as st:
        yield st


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def browser() -> AsyncIterator[Browser]:
    async with async_playwright() as p:
        b = await p.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        try:
            yield b
        finally:
            await b.close()


def here(stack: Stack) -> str:
    """The page as http://localhost (a browser binds no passkey to an IP address)."""
    return f"http://localhost:{stack.server.port}"


def body(msg: EmailMessage) -> str:
    part = msg.get_body(("plain",))
    assert isinstance(part, EmailMessage)
    return str(part.get_content())


async def ask_link(page: Page, stack: Stack, address: str) -> None:
    await page.goto(f"{here(stack)}/login")
    await page.get_by_label("Email address").fill(address)
    await page.get_by_role("button", name="Mail me a sign-in link").click()
    await expect(page.get_by_role("status")).to_contain_text(SENT)


async def link_in_mail(mail: MailServer, seen: set[str]) -> str:
    """The link of the next sign-in mail to Alice (one whose Message-ID is not in `seen`)."""
    got = await mail.wait_for_mail(
        "alice",
        ALICE_PW,
        lambda m: "sign-in link" in str(m["Subject"]) and m["Message-ID"] not in seen,
        timeout=30,
    )
    seen.add(str(got["Message-ID"]))
    assert got["To"] == ALICE
    [link] = re.findall(r"http\S+/login/mail\?token=[A-Za-z0-9_-]+", body(got))
    return link


async def audit(stack: Stack) -> list[dict[str, Any]]:
    async with stack.server.client() as c:
        r = await c.get("/api/audit", params={"limit": 200})
    return list(r.json()["items"])


async def test_a_listed_person_signs_in_by_a_mailed_link_then_adds_a_passkey(
    browser: Browser, stack: Stack, mail: MailServer, output_dir: Path
) -> None:
    run = await stack.start_run("test", "Send Ann the quote")
    item = await stack.wait_item(run["id"])
    seen: set[str] = set()
    context = await browser.new_context()
    page = await context.new_page()
    try:
        # An address nobody lists: the same answer, and no mail (its refusal is audited).
        await ask_link(page, stack, "mallory@example.test")
        await ask_link(page, stack, ALICE.upper())
        await shoot(page, output_dir / "web-login-mail")  # and it fits a phone
        link = await link_in_mail(mail, seen)
        assert link.startswith(stack.server.url)  # the server's own address, not the request's
        secret = link.partition("token=")[2]

        # The link opens a page; only its button signs in (a mail scanner's fetch uses nothing).
        await page.goto(link.replace(stack.server.url, here(stack)))
        await page.goto(link.replace(stack.server.url, here(stack)))
        await page.get_by_role("button", name="Sign in").click()
        await page.wait_for_url(f"{here(stack)}/")
        await expect(page.locator("#boxes")).to_contain_text("send_email")

        # Alice decides her card on the page, as herself.
        await page.goto(f"{here(stack)}/items/{item['id']}")
        await page.get_by_role("button", name="Approve").click()
        await expect(page.locator(".decided")).to_contain_text(f"Approved by {ALICE} via web")
        await stack.wait_run(run["id"], {"done"})

        # She adds a passkey, logs out, and the passkey alone signs her in again.
        await add_authenticator(context, page)
        await page.goto(f"{here(stack)}/phone")
        await page.get_by_label(re.compile("^Name")).fill("Alice's phone")
        await page.get_by_role("button", name="Add a passkey").click()
        await expect(page.locator("#passkeys .devices")).to_contain_text("Alice's phone")
        await page.get_by_role("button", name="Log out").click()
        await page.goto(f"{here(stack)}/login")
        await page.get_by_role("button", name="Sign in with a passkey").click()
        await page.wait_for_url(f"{here(stack)}/")
        await expect(page.get_by_role("link", name="Phone")).to_be_visible()

        # The link worked once.
        await page.get_by_role("button", name="Log out").click()
        await page.goto(link.replace(stack.server.url, here(stack)))
        await page.get_by_role("button", name="Sign in").click()
        await expect(page.get_by_role("alert")).to_contain_text("used already")
        await page.goto(f"{here(stack)}/")
        await expect(page).to_have_url(re.compile(r"/login"))
    finally:
        await context.close()

    actions = [(a["action"], a["actor"]) for a in await audit(stack)]
    assert ("mail_signin_unknown", "unknown") in actions
    assert ("mail_signin_sent", ALICE) in actions and ("mail_signin", ALICE) in actions
    assert ("mail_signin_refused", "unknown") in actions
    assert ("passkey_login", ALICE) in actions
    assert secret not in stack.server.log_path.read_text(errors="replace")
    mailed = await mail.fetch_all("alice", ALICE_PW)
    assert len([m for m in mailed if "sign-in link" in str(m["Subject"])]) == 1
