"""The daily digest with an injected clock: the engine in-process puts a model turn's three
calls on cards, and at 08:30 Amsterdam time each approver gets one message listing the items
they may decide, with their ages and links: Slack direct messages through the real Web API
client (answered by the local recorder), mails through the email channel's composer. Once a
day, however many servers tick; nothing for a day nobody has anything waiting."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import pytest
from slack_sdk.web.async_client import AsyncWebClient

from pizzabot.agent.digest import Digests
from pizzabot.agent.policy import Access, Principal
from pizzabot.channels.email.compose import MailIdentity
from pizzabot.channels.email.digest import EmailDigest
from pizzabot.channels.slack.digest import SlackDigest
from pizzabot.store.mail import SqlMailLog
from tests.peers.batch_stories import three_at_once
from tests.peers.inproc import InProcess
from tests.peers.item_reads import count_item_reads
from tests.peers.slack_api import SlackApi

BOSS, HELPER, BOSS_MAIL = "U0BOSS", "U0HELP", "boss@example.test"
#: Monday 2 March 2026, 07:00 in Amsterdam (CET, UTC+1): the turn's cards are made then.
T0 = datetime(2026, 3, 2, 6, 0, tzinfo=UTC)

SKILL: dict[str, Any] = {
    "approvers": {"slack": [BOSS], "email": [BOSS_MAIL]},
    "tools": {
        # The helper may decide the mails only (they escalate to them).
        "crm.send_email": {"policy": "ask", "escalate_to": {"approvers": {"slack": [HELPER]}}},
        "crm.lookup": "ask",
    },
    "digest": {"at": "08:30", "timezone": "Europe/Amsterdam"},
}


class Mailbox:
    """The email channel's `Mailer` role, keeping what it was given to send."""

    def __init__(self) -> None:
        self.sent: list[EmailMessage] = []

    async def send(self, msg: EmailMessage) -> None:
        self.sent.append(msg)


def body(msg: EmailMessage) -> str:
    part = msg.get_body(("plain",))
    assert isinstance(part, EmailMessage)
    return str(part.get_content())


async def test_each_approver_gets_their_waiting_items_once_a_day(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = [T0]
    async with (
        SlackApi() as slack,
        InProcess(tmp_path, three_at_once, skill=SKILL, clock=lambda: now[0]) as h,
    ):
        run = await h.runs.start(
            "test", "mail two customers and look Ada up", by=Principal.owner("api")
        )
        await h.wait(run.id, {"waiting"})
        mailbox = Mailbox()
        client = AsyncWebClient(token="xoxb-test", base_url=slack.url)

        def server() -> Digests:
            """The digests as one server makes them (they share the database's record of what was sent)."""
            return Digests(
                ctx=replace(h.ctx, base_url="http://pizza.example"),
                access=Access(skills=h.ctx.skills),
                senders={
                    "slack": SlackDigest(client=client),
                    "email": EmailDigest(mailer=mailbox, identity=MailIdentity("bot@example.test")),
                },
                once_keys=SqlMailLog(h.store),
            )

        one, two = server(), server()
        now[0] = T0 + timedelta(hours=1, minutes=20)  # 08:20 in Amsterdam: not yet
        assert await one.tick() == []

        now[0] = T0 + timedelta(hours=1, minutes=45)  # 08:45 in Amsterdam
        sent = await one.tick()
        assert sorted((d.channel, d.address, len(d.items)) for d in sent) == [
            ("email", BOSS_MAIL, 3),
            ("slack", BOSS, 3),
            ("slack", HELPER, 2),
        ]
        posts = await slack.wait_for("chat.postMessage", count=2)
        opened = [c.args["users"] for c in slack.calls_to("conversations.open")]
        assert sorted(opened) == [BOSS, HELPER]
        texts = [str(p.args["text"]) for p in posts]
        boss_text = next(t for t in texts if "3 decisions" in t)
        helper_text = next(t for t in texts if "2 decisions" in t)
        assert boss_text.count("waiting 1h 45m") == 3
        assert "crm.lookup" in boss_text and "crm.lookup" not in helper_text
        items = await h.store.list_items(run_id=run.id)
        for item in items:
            assert f"<http://pizza.example/items/{item.id}|" in boss_text
        [mail] = mailbox.sent
        assert (
            mail["To"] == BOSS_MAIL and mail["Subject"] == "[pizzabot] 3 decisions waiting for you"
        )
        assert body(mail).count("(waiting 1h 45m): http://pizza.example/items/") == 3

        # Later the same day, and on another server: nothing is sent again. The server that
        # sent them does not even read the waiting items again; the other one reads them once.
        now[0] = T0 + timedelta(hours=6)
        reads = count_item_reads(h.store, monkeypatch)
        assert await one.tick() == [] and reads == []
        assert await two.tick() == [] and await two.tick() == [] and len(reads) == 1
        assert len(slack.calls_to("chat.postMessage")) == 2 and len(mailbox.sent) == 1

        # The next morning they still wait, a day older; the other server sends this time.
        now[0] = T0 + timedelta(days=1, hours=1, minutes=31)
        again = await two.tick()
        assert len(again) == 3 and await one.tick() == []
        latest = await slack.wait_for("chat.postMessage", count=4)
        assert all("waiting 1d 1h" in str(p.args["text"]) for p in latest[2:])

        # Once nothing waits, no digest goes out at all.
        await h.runs.cancel(run.id, by=Principal.owner("api"))
        now[0] = T0 + timedelta(days=2, hours=2)
        assert await one.tick() == []
        assert len(slack.calls_to("chat.postMessage")) == 4 and len(mailbox.sent) == 2
        slack.check()
