"""Question items by mail, against the real SMTP + IMAP peer: the mail lists what each field
accepts; Alice answers from her mail client with `field: value` lines (the values arrive
typed), in words, with "done" for a link, or declines with a reason; a value the form
refuses is answered with what is wrong and decides nothing; a stranger's reply counts for
nothing."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import pytest

from pizzabot.agent.addresses import EmailTarget
from pizzabot.agent.model import (
    Approve,
    Box,
    Decision,
    Edit,
    Item,
    ItemKind,
    ItemStatus,
    Reject,
    RunStatus,
)
from pizzabot.agent.questions import FREE_TEXT_SCHEMA
from pizzabot.channels.email.questions import Reading, question_text, read_answer
from tests.peers.email_bot import ALICE, MALLORY, USERS, EmailBot, reply_to, send
from tests.peers.mailserver import MailServer
from tests.peers.required import require
from tests.waiting import eventually

pytestmark = pytest.mark.mail

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "title": "Name"},
        "seats": {"type": "integer", "minimum": 1, "maximum": 10, "title": "Seats"},
        "vegetarian": {"type": "boolean", "title": "Vegetarian"},
        "plan": {
            "type": "string",
            "title": "Plan",
            "oneOf": [
                {"const": "free", "title": "Free plan"},
                {"const": "pro", "title": "Pro plan"},
            ],
        },
        "toppings": {
            "type": "array",
            "title": "Toppings",
            "items": {"type": "string", "enum": ["cheese", "ham", "olives"]},
        },
    },
    "required": ["name", "seats"],
}


@pytest.fixture(scope="module")
def mail() -> Iterator[MailServer]:
    require("mail")
    with MailServer(users=USERS) as server:
        yield server


async def ask(
    bot: EmailBot,
    *,
    schema: dict[str, Any] | None = SCHEMA,
    args: dict[str, Any] | None = None,
    title: str = "Book the table",
    body: str = "How should I book it?",
) -> Item:
    """A pending question of a running tool call, mailed to Alice by the outbox."""
    ctx, now = bot.ctx, bot.ctx.clock()
    run = await bot.store.create_run(
        run_id=ctx.ids(), skill="test", input="plan the dinner", trigger="api", now=now
    )
    await bot.store.set_status(run.id, RunStatus.RUNNING, lease=None, now=now)
    item = Item(
        id=ctx.ids(),
        run_id=run.id,
        skill="test",
        box=Box.ACTION,
        kind=ItemKind.QUESTION,
        status=ItemStatus.PENDING,
        title=title,
        body=body,
        created_at=now,
        call_id=f"call-{uuid.uuid4().hex[:6]}",
        args=dict(args or {}),
        schema=schema,
        secret=ctx.secrets(),
    )
    made = await bot.store.create_item(item, targets=[EmailTarget(ALICE)], lease=None, now=now)
    bot.dispatcher.wake()
    return made


def text_of(msg: EmailMessage, kind: str = "plain") -> str:
    part = msg.get_body((kind,))
    assert isinstance(part, EmailMessage)
    return str(part.get_content())


async def item_when(bot: EmailBot, item_id: str, status: ItemStatus) -> Item:
    async def there() -> Item | None:
        item = await bot.store.get_item(item_id)
        return item if item.status is status else None

    return await eventually(there, what=f"item {item_id} to be {status.value}")


async def notice(bot: EmailBot, item: Item, containing: str) -> EmailMessage:
    """The mail that says how the question ended, in its thread."""
    return await bot.mail_for(
        item.id, where=lambda m: m["Reply-To"] is None and containing in text_of(m)
    )


async def test_the_mail_lists_the_fields_and_a_reply_answers_with_typed_values(
    mail: MailServer, tmp_path: Path
) -> None:
    async with EmailBot(mail, tmp_path) as bot:
        item = await ask(bot)
        got = await bot.mail_for(item.id)
        assert got["Subject"] == "[pizzabot] test: Book the table"
        plain = text_of(got)
        assert "How should I book it?" in plain
        assert "seats: a whole number from 1 to 10; required" in plain
        assert "plan: one of: free (Free plan), pro (Pro plan); optional" in plain
        assert "toppings: any of: cheese, ham, olives" in plain
        assert '"field: value"' in plain and '"decline"' in plain
        assert "seats: a whole number" in text_of(got, "html")

        answer = "name: Ann\nseats: 3\nvegetarian: yes\ntoppings: cheese, Olives\nplan: Pro plan"
        await send(mail, reply_to(got, f"{answer}\n\nThanks,\nAlice"))
        assert await bot.next_outcome() == "decided: edit"

        answered = await item_when(bot, item.id, ItemStatus.EDITED)
        assert answered.final_args == {
            "name": "Ann",
            "seats": 3,
            "vegetarian": True,
            "plan": "pro",
            "toppings": ["cheese", "olives"],
        }
        assert (answered.decided_by, answered.decided_via) == (ALICE, "email")
        told = await notice(bot, item, "Answered by")
        assert f"Answered by {ALICE} via email" in text_of(told)
        assert "plan: Pro plan" in text_of(told) and "seats: 3" in text_of(told)
        assert told["Subject"] == got["Subject"] and told["In-Reply-To"] == got["Message-ID"]


async def test_a_value_the_form_refuses_is_answered_and_decides_nothing(
    mail: MailServer, tmp_path: Path
) -> None:
    async with EmailBot(mail, tmp_path) as bot:
        item = await ask(bot)
        got = await bot.mail_for(item.id)
        bad = reply_to(got, "name: Ann\nseats: eleven\nvegetarian: maybe\nsize: large")
        await send(mail, bad)
        assert (await bot.next_outcome()).startswith("answer refused: size")
        [answer] = await bot.answers_to(str(bad["Message-ID"]))
        assert "- size: no such field; the fields are name, seats" in text_of(answer)
        assert (await bot.store.get_item(item.id)).status is ItemStatus.PENDING

        # The fields are right now, the values not: each wrong value is named.
        bad = reply_to(answer, "name: Ann\nseats: 11\nvegetarian: maybe")
        await send(mail, bad)
        assert (await bot.next_outcome()).startswith("answer refused: ")
        [answer] = await bot.answers_to(str(bad["Message-ID"]))
        said = text_of(answer)
        assert "Your answer was not taken; the question still waits for one." in said
        assert "- seats: must be at most 10" in said
        assert "- vegetarian: must be true or false" in said
        assert (await bot.store.get_item(item.id)).status is ItemStatus.PENDING

        # A reply to the answer mail answers the question.
        await send(mail, reply_to(answer, "name: Ann\nseats: 10\nvegetarian: no"))
        assert await bot.next_outcome() == "decided: edit"
        answered = await item_when(bot, item.id, ItemStatus.EDITED)
        assert answered.final_args == {"name": "Ann", "seats": 10, "vegetarian": False}


async def test_declining_with_a_reason_and_a_strangers_reply_counts_for_nothing(
    mail: MailServer, tmp_path: Path
) -> None:
    async with EmailBot(mail, tmp_path) as bot:
        item = await ask(bot)
        got = await bot.mail_for(item.id)
        await send(mail, reply_to(got, "decline", sender=f"Mallory <{MALLORY}>"))
        assert (await bot.next_outcome()).startswith("refused:")
        assert (await bot.store.get_item(item.id)).status is ItemStatus.PENDING

        await send(mail, reply_to(got, "Hi,\n\ndecline\nWe eat at home tonight.\n\nBest,\nAlice"))
        assert await bot.next_outcome() == "decided: reject"
        declined = await item_when(bot, item.id, ItemStatus.REJECTED)
        assert declined.reason == "We eat at home tonight." and declined.decided_by == ALICE
        told = await notice(bot, item, "Declined by")
        assert "Reason: We eat at home tonight." in text_of(told)


async def test_a_question_in_words_takes_the_reply_as_the_answer(
    mail: MailServer, tmp_path: Path
) -> None:
    async with EmailBot(mail, tmp_path) as bot:
        item = await ask(bot, schema=FREE_TEXT_SCHEMA, title="Which day suits you?")
        got = await bot.mail_for(item.id)
        assert "your text above the quoted mail is the answer" in text_of(got)
        await send(mail, reply_to(got, "Tuesday, after six.\nOr Wednesday.\n\nThanks,\nAlice"))
        assert await bot.next_outcome() == "decided: edit"
        answered = await item_when(bot, item.id, ItemStatus.EDITED)
        assert answered.final_args == {"answer": "Tuesday, after six.\nOr Wednesday."}


async def test_a_link_question_names_its_domain_and_done_accepts_it(
    mail: MailServer, tmp_path: Path
) -> None:
    url = "https://accounts.example.com/connect?a=1"
    async with EmailBot(mail, tmp_path) as bot:
        item = await ask(bot, schema=None, args={"url": url}, title="Connect your calendar")
        got = await bot.mail_for(item.id)
        plain = text_of(got)
        assert "The link leads to: example.com (host accounts.example.com)" in plain
        assert url in plain
        assert '"done"' in plain
        assert "<b>example.com</b> (host accounts.example.com)" in text_of(got, "html")
        assert "href='https://accounts" not in text_of(got, "html")  # shown, not a link

        sure = reply_to(got, "Sounds fine, I think")
        await send(mail, sure)
        assert await bot.next_outcome() == "no answer found"
        [answer] = await bot.answers_to(str(sure["Message-ID"]))
        assert '"done"' in text_of(answer)

        await send(mail, reply_to(got, "Done!"))
        assert await bot.next_outcome() == "decided: approve"
        done = await item_when(bot, item.id, ItemStatus.APPROVED)
        assert done.decided_by == ALICE
        await notice(bot, item, f"Done by {ALICE} via email")


# --- reading a reply, without the mail peer ----------------------------------------------


def question(schema: dict[str, Any] | None, args: dict[str, Any] | None = None) -> Item:
    return Item(
        id="q1",
        run_id="r1",
        skill="test",
        box=Box.ACTION,
        kind=ItemKind.QUESTION,
        status=ItemStatus.PENDING,
        title="Book the table",
        body="How should I book it?",
        created_at=datetime(2026, 12, 1, tzinfo=UTC),
        args=args or {},
        schema=schema,
    )


@pytest.mark.parametrize(
    ("schema", "args", "top", "expected"),
    [
        # "ok" accepts proposed values, and only where there are some.
        (SCHEMA, {"name": "Ann", "seats": 2}, "ok, thanks!", Approve()),
        (SCHEMA, {}, "ok", None),
        # "yes" may be a field's answer: it accepts nothing.
        (SCHEMA, {"name": "Ann", "seats": 2}, "yes", None),
        (SCHEMA, {}, "Hello Bot,\n\nDecline: not tonight\n\nCheers,\nAl", Reject("not tonight")),
        (SCHEMA, {}, "Seats: 2\nNAME: Al", Edit({"name": "Al", "seats": 2, "vegetarian": False})),
        # In words, an answer may begin with the word; "decline" alone declines.
        (FREE_TEXT_SCHEMA, {}, "Decline the offer", Edit({"answer": "Decline the offer"})),
        (FREE_TEXT_SCHEMA, {}, "decline\n\nsorry", Reject("sorry")),
        (None, {"url": "https://a.example/"}, "yes", Approve()),
        (None, {"url": "https://a.example/"}, "name: Ann", None),
    ],
)
def test_what_a_reply_answers(
    schema: dict[str, Any] | None, args: dict[str, Any], top: str, expected: Decision | None
) -> None:
    reading = read_answer(question(schema, args), top)
    assert reading == Reading(expected)


def test_an_unknown_field_is_named_with_the_fields_there_are() -> None:
    reading = read_answer(question(SCHEMA), "name: Al\nseat: 2")
    assert reading.decision is None
    assert reading.errors == {
        "seat": "no such field; the fields are name, seats, vegetarian, plan, toppings"
    }


def test_a_links_international_domain_is_named_in_ascii() -> None:
    text = "\n".join(
        question_text(question(None, {"url": "https://bаnk.example/x"}), can_decide=True, page=None)
    )
    # The whole link too, as the browser opens it: the look-alike letter never shows.
    assert "The link leads to: xn--bnk-6cd.example" in text
    assert "https://xn--bnk-6cd.example/x" in text and "bаnk" not in text
