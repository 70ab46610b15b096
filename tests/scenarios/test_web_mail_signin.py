"""Signing in by a mailed link, in-process (httpx ASGITransport), with the mail channel stood in
for by a recorder and the clock injected: the link is made only for an address `people:`
lists, from the server's own address whatever the request's Host says; it is stored hashed,
works once and for 15 minutes; it signs in as that address, which decides as the skills' lists
say; and a person the skills stop listing is signed out at once.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from pizzabot.agent.model import ItemStatus
from pizzabot.agent.skills import Approvers, Person, Skill
from pizzabot.channels.web.mail_signin import MailSignIn
from pizzabot.store.phone import CHALLENGES, SqlPasskeys
from tests.peers.web import SKILL, T0, WebApp, csrf_of

ALICE = "alice@example.test"
BASE_URL = "https://pizza.example.test"
LISTED = Skill(
    name="test",
    description="a skill whose approver is a person with an address",
    instructions="test",
    model="openai/none",
    people={"alice": Person(email=ALICE)},
    approvers=Approvers(people=["alice"]),
)
SCHEMA = {"type": "object", "properties": {"to": {"type": "string"}}, "required": ["to"]}
SENT = "If that address belongs to someone who may sign in here"


@dataclasses.dataclass
class Mailed:
    """The mail channel, stood in for: what it was asked to send."""

    sent: list[dict[str, Any]] = dataclasses.field(default_factory=list)

    def send_signin(self, *, to: str, link: str, expires: datetime) -> None:
        self.sent.append({"to": to, "link": link, "expires": expires})


@dataclasses.dataclass
class Clock:
    now: datetime = T0

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
async def web(tmp_path: Path) -> AsyncIterator[tuple[WebApp, Mailed, Clock]]:
    mailed, clock = Mailed(), Clock()
    async with WebApp(tmp_path, skill=LISTED) as app:
        signin = MailSignIn(
            skills=app.ctx.skills,
            ceremonies=SqlPasskeys(app.store.db),
            trail=app.store,
            mailer=mailed,
            base_url=BASE_URL,
            clock=clock,
        )
        app.deps = dataclasses.replace(app.deps, mail_signin=signin)
        yield app, mailed, clock


def secret_of(link: str) -> str:
    return link.partition("?token=")[2]


async def test_only_a_listed_address_gets_a_link_and_every_address_the_same_answer(
    web: tuple[WebApp, Mailed, Clock],
) -> None:
    app, mailed, _ = web
    async with app.client() as c:
        login = await c.get("/login")
        assert 'name="address"' in login.text and "Mail me a sign-in link" in login.text
        answers = []
        for address in ("nobody@example.test", "not an address", f" {ALICE.upper()} "):
            r = await c.post(
                "/login/mail/send", data={"address": address}, headers={"Host": "evil.test"}
            )
            answers.append((r.status_code, r.headers["location"]))
            assert SENT in (await c.get(r.headers["location"])).text
    assert answers == [(303, "/login?flash=mailed")] * 3
    [mail] = mailed.sent
    assert mail["to"] == ALICE
    assert mail["link"].startswith(f"{BASE_URL}/login/mail?token=")  # not the Host header's
    assert mail["expires"] == T0 + timedelta(minutes=15)
    stored = await app.store.db.read(lambda conn: conn.execute(select(CHALLENGES)).all())
    # One row per request (so the answers take alike), only the listed one for someone.
    assert sorted((row.purpose, row.principal or "") for row in stored) == [
        ("mail_signin", ""),
        ("mail_signin", ""),
        ("mail_signin", f"web:{ALICE}"),
    ]
    assert secret_of(mail["link"]) not in str(stored)  # kept only as its hash
    actions = [e.action for e in await app.store.audit_log()]
    assert actions.count("mail_signin_unknown") == 2 and actions.count("mail_signin_sent") == 1


async def test_the_link_signs_in_once_as_that_address_which_decides_as_the_lists_say(
    web: tuple[WebApp, Mailed, Clock],
) -> None:
    app, mailed, _ = web
    item = await app.action_item(schema=SCHEMA, args={"to": "ann@example.com"})
    async with app.client() as c:
        await c.post("/login/mail/send", data={"address": ALICE})
        secret = secret_of(mailed.sent[0]["link"])
        # Opening the link uses nothing up: a mail scanner may fetch it first.
        for _ in range(2):
            opened = await c.get("/login/mail", params={"token": secret})
            assert opened.status_code == 200 and "Sign in" in opened.text
        r = await c.post("/login/mail", data={"token": secret, "next": f"/items/{item.id}"})
        assert r.status_code == 303 and r.headers["location"] == f"/items/{item.id}"
        page = await c.get(f"/items/{item.id}")
        seen = page.text.split('name="seen" value="')[1].split('"')[0]
        decided = await c.post(
            f"/items/{item.id}",
            data={"decision": "approve", "seen": seen, "csrf": csrf_of(page.text)},
        )
        assert decided.status_code == 303
    done = await app.store.get_item(item.id)
    assert done.status is ItemStatus.APPROVED
    assert (done.decided_by, done.decided_via) == (ALICE, "web")

    async with app.client() as again:
        r = await again.post("/login/mail", data={"token": secret})
        assert r.status_code == 401 and "used already" in r.text
        assert (await again.get("/")).status_code == 303  # still signed out


async def test_a_link_works_for_fifteen_minutes_only(web: tuple[WebApp, Mailed, Clock]) -> None:
    app, mailed, clock = web
    async with app.client() as c:
        await c.post("/login/mail/send", data={"address": ALICE})
        clock.now = T0 + timedelta(minutes=15, seconds=1)
        r = await c.post("/login/mail", data={"token": secret_of(mailed.sent[0]["link"])})
        assert r.status_code == 401 and "has expired" in r.text
    refused = [e for e in await app.store.audit_log() if e.action == "mail_signin_refused"]
    assert len(refused) == 1


async def test_a_person_no_skill_lists_any_more_is_signed_out_at_once(
    web: tuple[WebApp, Mailed, Clock],
) -> None:
    app, mailed, _ = web
    async with app.client() as c:
        await c.post("/login/mail/send", data={"address": ALICE})
        r = await c.post("/login/mail", data={"token": secret_of(mailed.sent[0]["link"])})
        assert r.status_code == 303
        assert (await c.get("/")).status_code == 200
        app.ctx.skills.replace({"test": SKILL})  # alice is no longer under people:
        r = await c.get("/")
        assert r.status_code == 303 and r.headers["location"].startswith("/login")


async def test_no_mail_channel_no_link_offered(tmp_path: Path) -> None:
    async with WebApp(tmp_path, skill=LISTED) as app, app.client() as c:
        assert 'name="address"' not in (await c.get("/login")).text
        r = await c.post("/login/mail/send", data={"address": ALICE})
        assert r.status_code == 404
