"""The email channel against a real SMTP + IMAP server (dovecot) on loopback, in-process.

Items go out by SMTP into one thread per run; replies written the way mail clients write
them come back through IMAP IDLE and decide, follow up or start runs. Refusals, duplicates,
restarts and a mailbox server that goes away are here too; the whole server process is in
tests/test_email_e2e.py.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from email.message import EmailMessage
from email.utils import make_msgid
from pathlib import Path

import pytest

from pizzabot.agent.channel import DeliveryError
from pizzabot.agent.model import Approve, EventKind, ItemStatus, RunStatus
from pizzabot.agent.policy import Principal
from pizzabot.channels.email import SmtpConfig, SmtpMailer
from tests.peers.email_bot import (
    ALICE,
    MALLORY,
    MALLORY_PW,
    PROPOSED,
    USERS,
    EmailBot,
    email_skill,
    passed,
    reply_to,
    send,
    stop_imap_dropping_clients,
    verified,
)
from tests.peers.mailserver import MailServer, free_port
from tests.peers.required import require
from tests.waiting import eventually

pytestmark = pytest.mark.mail


@pytest.fixture(scope="module")
def mail() -> Iterator[MailServer]:
    require("mail")
    with MailServer(users=USERS) as server:
        yield server


async def refusals(bot: EmailBot) -> list[dict[str, object]]:
    return [e.detail for e in await bot.store.audit_log() if e.action == "email_refused"]


# --- out --------------------------------------------------------------------------------


async def test_action_mail_arrives_threaded_with_reply_instructions(
    mail: MailServer, tmp_path: Path
) -> None:
    async with EmailBot(mail, tmp_path) as bot:
        first = await bot.action(run_input="send Ann the quote")
        got = await bot.mail_for(first.id)

        assert got["Subject"] == "[pizzabot] test: send Ann the quote"
        token = bot.key.reply_token(first.id, ALICE)  # Alice's own, made with the server's key
        assert got["Reply-To"].addresses[0].addr_spec == f"{bot.user}+{token}@example.test"
        assert token in got["Message-ID"] and first.secret not in got.as_string()
        assert got["In-Reply-To"] is None
        plain = got.get_body(("plain",))
        html = got.get_body(("html",))
        assert isinstance(plain, EmailMessage) and isinstance(html, EmailMessage)
        for part in (plain.get_content(), html.get_content()):
            assert "crm.send_email" in part and "I will mail Ann." in part
            assert "ann@example.com" in part and "cannot be undone" in part
        assert "reject REASON" in plain.get_content()

        second = await bot.action(run_id=first.run_id)
        got2 = await bot.mail_for(second.id)
        assert got2["Subject"] == got["Subject"]
        assert got2["In-Reply-To"] == got["Message-ID"]
        assert str(got2["References"]).split() == [got["Message-ID"]]


async def test_smtp_down_raises_a_retryable_delivery_error(mail: MailServer) -> None:
    msg = EmailMessage()
    msg["From"] = "bot@example.test"
    msg["To"] = ALICE
    msg["Subject"] = "x"
    msg.set_content("x")
    dead = SmtpMailer(SmtpConfig(host="127.0.0.1", port=free_port(), tls="none", timeout=2))
    with pytest.raises(DeliveryError) as down:
        await dead.send(msg)
    assert not down.value.permanent

    msg.replace_header("To", "nobody-here@example.test")
    live = SmtpMailer(SmtpConfig(host=mail.host, port=mail.smtp_port, tls="none"))
    with pytest.raises(DeliveryError) as refused:
        await live.send(msg)
    assert refused.value.permanent


# --- replies ----------------------------------------------------------------------------


async def test_reply_approve_decides_and_the_outcome_lands_in_the_thread(
    mail: MailServer, tmp_path: Path
) -> None:
    async with EmailBot(mail, tmp_path) as bot:
        item = await bot.action()
        got = await bot.mail_for(item.id)
        await send(mail, reply_to(got, "Approve"))

        assert await bot.next_outcome() == "decided: approve"
        decided = await bot.store.get_item(item.id)
        assert decided.status is ItemStatus.APPROVED
        assert (decided.decided_by, decided.decided_via) == (ALICE, "email")
        assert (await bot.store.get_run(item.run_id)).status is RunStatus.QUEUED
        notice = await bot.mail_for(item.id, where=lambda m: m["Reply-To"] is None)
        assert notice["In-Reply-To"] == got["Message-ID"]
        assert notice["Subject"] == got["Subject"]
        body = notice.get_body(("plain",))
        assert isinstance(body, EmailMessage)
        assert f"Approved by {ALICE} via email" in body.get_content()


async def test_edit_with_a_bad_field_mails_the_errors_then_a_good_edit_decides(
    mail: MailServer, tmp_path: Path
) -> None:
    async with EmailBot(mail, tmp_path) as bot:
        item = await bot.action()
        got = await bot.mail_for(item.id)
        bad = reply_to(got, "edit\ncopies: 11\nsubject: Better quote")
        await send(mail, bad)
        assert await bot.next_outcome() == "edit refused: copies"
        assert (await bot.store.get_item(item.id)).status is ItemStatus.PENDING
        [answer] = await bot.answers_to(str(bad["Message-ID"]))
        text = answer.get_body(("plain",))
        assert isinstance(text, EmailMessage)
        assert "- copies:" in text.get_content() and "10" in text.get_content()
        # The error mail stays on the thread and keeps the token, so a reply to it works.
        assert got["Message-ID"] in str(answer["References"])

        good = reply_to(answer, "edit\ncopies: 3\nsubject: Better quote")
        await send(mail, good)
        assert await bot.next_outcome() == "decided: edit"
        decided = await bot.store.get_item(item.id)
        assert decided.status is ItemStatus.EDITED
        assert decided.final_args == {**PROPOSED, "copies": 3, "subject": "Better quote"}


async def test_reject_with_a_reason(mail: MailServer, tmp_path: Path) -> None:
    async with EmailBot(mail, tmp_path) as bot:
        item = await bot.action()
        got = await bot.mail_for(item.id)
        await send(
            mail, reply_to(got, "reject: Ann asked us to wait until Monday.\n\nThanks,\nAlice")
        )
        assert await bot.next_outcome() == "decided: reject"
        decided = await bot.store.get_item(item.id)
        assert decided.status is ItemStatus.REJECTED
        assert decided.reason == "Ann asked us to wait until Monday."


async def test_a_second_answer_is_told_who_was_first(mail: MailServer, tmp_path: Path) -> None:
    async with EmailBot(mail, tmp_path) as bot:
        item = await bot.action()
        got = await bot.mail_for(item.id)
        await bot.inbox.decide(item.id, Approve(), by=Principal.owner("web"))
        late = reply_to(got, "reject too late")
        await send(mail, late)
        assert await bot.next_outcome() == "already decided"
        [answer] = await bot.answers_to(str(late["Message-ID"]))
        text = answer.get_body(("plain",))
        assert isinstance(text, EmailMessage)
        assert "Approved by owner via web" in text.get_content()


async def test_no_decision_found_is_explained(mail: MailServer, tmp_path: Path) -> None:
    async with EmailBot(mail, tmp_path) as bot:
        item = await bot.action()
        got = await bot.mail_for(item.id)
        question = reply_to(got, "What does this do?")
        await send(mail, question)
        assert await bot.next_outcome() == "no decision found"
        [answer] = await bot.answers_to(str(question["Message-ID"]))
        assert (await bot.store.get_item(item.id)).status is ItemStatus.PENDING
        text = answer.get_body(("plain",))
        assert isinstance(text, EmailMessage) and "approve" in text.get_content()


async def test_reply_to_the_result_follows_up_the_run(mail: MailServer, tmp_path: Path) -> None:
    async with EmailBot(mail, tmp_path) as bot:
        item = await bot.action()
        first = await bot.mail_for(item.id)
        await bot.inbox.decide(item.id, Approve(), by=Principal.owner("web"))
        unread = await bot.finish(item.run_id, result="Mailed Ann the quote.")
        result_mail = await bot.mail_for(unread.id)
        assert result_mail["Subject"] == first["Subject"]
        assert first["Message-ID"] in str(result_mail["References"])
        body = result_mail.get_body(("plain",))
        assert isinstance(body, EmailMessage) and "Mailed Ann the quote." in body.get_content()

        await send(mail, reply_to(result_mail, "Thanks. Now mail Bob the same quote."))
        assert await bot.next_outcome() == "follow-up"
        run = await bot.store.get_run(item.run_id)
        assert run.status is RunStatus.QUEUED
        events = await bot.store.events(item.run_id)
        message = [e for e in events if e.kind is EventKind.USER_MESSAGE][-1]
        assert message.data == {
            "text": "Thanks. Now mail Bob the same quote.",
            "by": ALICE,
            "channel": "email",
        }
        assert (await bot.store.get_item(unread.id)).status is ItemStatus.READ


async def test_only_the_skills_approvers_follow_a_run_up_by_mail(
    mail: MailServer, tmp_path: Path
) -> None:
    skill = email_skill(deliver={"email": [ALICE, MALLORY]})
    async with EmailBot(mail, tmp_path, skill=skill) as bot:
        item = await bot.action()
        await bot.inbox.decide(item.id, Approve(), by=Principal.owner("web"))
        unread = await bot.finish(item.run_id, result="Mailed Ann the quote.")
        her_copy = await bot.mail_for(unread.id, user="mallory", password=MALLORY_PW)
        reply = reply_to(her_copy, "Now mail me the quote too.", sender=f"Mallory <{MALLORY}>")
        await send(mail, reply)
        outcome = await bot.next_outcome()
        assert outcome.startswith("refused: ") and "not an email approver" in outcome
        assert (await bot.store.get_run(item.run_id)).status is RunStatus.DONE
        [refused] = [e for e in await bot.store.audit_log() if e.action == "follow_up_refused"]
        assert (refused.actor, refused.channel, refused.run_id) == (MALLORY, "email", item.run_id)
        # Mallory is nobody the bot knows: nothing is mailed back to her.
        assert (
            await bot.answers_to(str(reply["Message-ID"]), user="mallory", password=MALLORY_PW)
            == []
        )


# --- new runs by mail ---------------------------------------------------------------------


async def test_allowed_sender_starts_a_run_with_the_tagged_skill(
    mail: MailServer, tmp_path: Path
) -> None:
    async with EmailBot(mail, tmp_path, allowed_senders=frozenset({ALICE})) as bot:
        msg = verified(
            _mail(f"Alice <{ALICE}>", bot.address, "[test] Quote for Ann", "She wants 3 copies.")
        )
        await send(mail, msg)
        outcome = await bot.next_outcome()
        assert outcome.startswith("started: ")
        run = await bot.store.get_run(outcome.removeprefix("started: "))
        assert (run.skill, run.trigger) == ("test", "email")
        assert run.input == "Quote for Ann\n\nShe wants 3 copies."
        [ack] = await bot.answers_to(str(msg["Message-ID"]))
        assert run.id in str(ack.get_body(("plain",)).get_content())  # type: ignore[union-attr]

        # The same mail again (a second copy) starts nothing new.
        await send(mail, msg)
        assert await bot.next_outcome() == "duplicate"
        assert len(await bot.store.list_runs()) == 1


async def test_strangers_start_nothing_and_hear_nothing(mail: MailServer, tmp_path: Path) -> None:
    async with EmailBot(mail, tmp_path, allowed_senders=frozenset({ALICE})) as bot:
        msg = _mail(f"Mallory <{MALLORY}>", bot.address, "[test] wire money", "now")
        await send(mail, msg)
        assert (await bot.next_outcome()).startswith("refused: ")
        assert await bot.store.list_runs() == []
        assert (
            await bot.answers_to(str(msg["Message-ID"]), user="mallory", password=MALLORY_PW) == []
        )
        assert (await refusals(bot))[0]["subject"] == "[test] wire money"
        [refused] = [e for e in await bot.store.audit_log() if e.action == "start_refused"]
        assert (refused.actor, refused.channel) == (MALLORY, "email")
        assert refused.detail["why"] == "may not start runs through this channel"


# --- refusals ---------------------------------------------------------------------------


async def test_refusals_decide_nothing_and_do_not_stop_the_loop(
    mail: MailServer, tmp_path: Path
) -> None:
    skill = email_skill(deliver={"email": [ALICE, MALLORY]})
    async with EmailBot(mail, tmp_path, skill=skill) as bot:
        item = await bot.action()
        got = await bot.mail_for(item.id)
        mallory_copy = await bot.mail_for(item.id, user="mallory", password=MALLORY_PW)
        bad: list[EmailMessage | tuple[bytes, list[str]]] = []

        # Spoofed From: Mallory writes as Alice but never got Alice's token or thread.
        spoof = _mail(f"Alice <{ALICE}>", bot.address, f"Re: {got['Subject']}", "approve")
        bad.append(spoof)
        # A non-approver who got a copy replies (to all) with "approve".
        bad.append(reply_to(mallory_copy, "approve", sender=f"Mallory <{MALLORY}>", cc=ALICE))
        # Wrong token: the thread's Message-ID with another token, and no plus-address.
        wrong = reply_to(got, "approve", to=bot.address)
        token = bot.key.reply_token(item.id, ALICE)
        forged_ref = str(got["Message-ID"]).replace(token, "x" * len(token))
        wrong.replace_header("In-Reply-To", forged_ref)
        wrong.replace_header("References", forged_ref)
        bad.append(wrong)
        # Missing token: no threading headers at all, only the subject.
        unthreaded = reply_to(got, "approve", to=bot.address)
        del unthreaded["In-Reply-To"]
        del unthreaded["References"]
        bad.append(unthreaded)
        # Forged per the receiving server: DMARC failed.
        bad.append(
            reply_to(
                got,
                "approve",
                headers={
                    "Authentication-Results": "mx.example.test; dmarc=fail (p=reject) "
                    "header.from=example.test"
                },
            )
        )
        # 10 MB.
        huge = reply_to(got, "approve")
        huge.add_attachment(os.urandom(10 * 1024 * 1024), maintype="application", subtype="zip")
        bad.append(huge)
        # 8-bit text with no charset declared.
        raw = _undeclared_8bit(got, to=str(got["Reply-To"].addresses[0].addr_spec))
        bad.append((raw, [got["Reply-To"].addresses[0].addr_spec]))

        for msg in bad:
            if isinstance(msg, tuple):
                await send(mail, msg[0], to=msg[1])
            else:
                await send(mail, msg)
        outcomes = [await bot.outcome(i, timeout=30) for i in range(len(bad))]

        assert all(o.startswith("refused: ") for o in outcomes), outcomes
        assert "not on the thread" in outcomes[0]
        assert "not an email approver" in outcomes[1]
        assert "not on the thread" in outcomes[2] and "not on the thread" in outcomes[3]
        assert "DMARC" in outcomes[4]
        assert "too large" in outcomes[5]
        assert "charset" in outcomes[6]
        assert (await bot.store.get_item(item.id)).status is ItemStatus.PENDING
        assert len(await refusals(bot)) == len(bad)
        # Mallory is nobody the bot knows: no mail back to her (no backscatter).
        mallory_mail = await mail.fetch_all("mallory", MALLORY_PW)
        assert [m for m in mallory_mail if m["Auto-Submitted"] == "auto-replied"] == []

        # The loop is alive: a proper reply still decides.
        await send(mail, reply_to(got, "approve"))
        assert await bot.outcome(len(bad)) == "decided: approve"


async def test_the_bots_own_and_automatic_mail_is_ignored(mail: MailServer, tmp_path: Path) -> None:
    async with EmailBot(mail, tmp_path) as bot:
        item = await bot.action()
        got = await bot.mail_for(item.id)
        vacation = reply_to(got, "I am out of office", headers={"Auto-Submitted": "auto-replied"})
        await send(mail, vacation)
        assert (await bot.next_outcome()).startswith("ignored: sent automatically")
        assert await bot.answers_to(str(vacation["Message-ID"])) == []


# --- reliability ------------------------------------------------------------------------


async def test_reply_sent_while_the_bot_is_down_is_handled_once_on_start(
    mail: MailServer, tmp_path: Path
) -> None:
    async with EmailBot(mail, tmp_path) as bot:
        item = await bot.action()
        got = await bot.mail_for(item.id)
        await bot.stop_receiver()
        await send(mail, reply_to(got, "yes"))
        await mail.wait_for_mail(bot.user, bot.password, lambda m: m["From"] is not None)

        bot.start_receiver()
        assert await bot.next_outcome() == "decided: approve"

        # A crash after handling but before \Seen: the mail is unseen again on the next
        # start, and the Message-ID record keeps it from deciding twice.
        client = await mail.connect_imap(bot.user, bot.password)
        try:
            await client.select("INBOX")
            await client.uid("store", "1:*", "-FLAGS", r"(\Seen)")
        finally:
            await client.logout()
        await bot.stop_receiver()
        bot.start_receiver()
        assert await bot.next_outcome() == "duplicate"
        decisions = [e for e in await bot.store.audit_log() if e.action == "decision"]
        assert len(decisions) == 1


async def test_imap_outage_while_a_run_waits_picks_the_reply_up_once(
    mail: MailServer, tmp_path: Path
) -> None:
    async with EmailBot(mail, tmp_path) as bot:
        item = await bot.action()
        got = await bot.mail_for(item.id)
        await bot.receiver.connected.wait()
        connects = bot.receiver.connects

        await stop_imap_dropping_clients(mail)
        try:
            await eventually(
                lambda: not bot.receiver.connected.is_set(), what="the receiver to lose IMAP"
            )
            await send(mail, reply_to(got, "approve"))
            assert mail.queued == 1
            # The receiver keeps trying (and failing) to reconnect meanwhile.
            failures = bot.receiver.failures
            await eventually(
                lambda: bot.receiver.failures >= failures + 2, what="two failed reconnects"
            )
            assert (await bot.store.get_item(item.id)).status is ItemStatus.PENDING
        finally:
            await mail.start_imap()

        assert await bot.next_outcome(timeout=30) == "decided: approve"
        assert bot.receiver.connects > connects
        assert (await bot.store.get_item(item.id)).status is ItemStatus.APPROVED
        # Once: nothing else is handled afterwards.
        await send(mail, reply_to(got, "reject changed my mind"))
        assert await bot.next_outcome() == "already decided"
        assert bot.outcomes == ["decided: approve", "already decided"]


async def test_polling_where_idle_is_off(mail: MailServer, tmp_path: Path) -> None:
    async with EmailBot(mail, tmp_path, idle=False, poll_interval=0.3) as bot:
        item = await bot.action()
        got = await bot.mail_for(item.id)
        await send(mail, reply_to(got, "ok"))
        assert await bot.next_outcome() == "decided: approve"


# --- helpers ------------------------------------------------------------------------------


def _mail(sender: str, to: str, subject: str, body: str) -> EmailMessage:
    msg = EmailMessage()
    msg["From"] = sender
    msg["To"] = to
    msg["Subject"] = subject
    msg["Message-ID"] = make_msgid(domain="example.test")
    msg.set_content(body)
    return msg


def _undeclared_8bit(got: EmailMessage, *, to: str) -> bytes:
    head = (
        f"Authentication-Results: {passed(ALICE)}\r\n"
        f"From: Alice <{ALICE}>\r\nTo: {to}\r\nSubject: Re: {got['Subject']}\r\n"
        f"Message-ID: {make_msgid(domain='example.test')}\r\n"
        f"In-Reply-To: {got['Message-ID']}\r\nReferences: {got['Message-ID']}\r\n"
        "MIME-Version: 1.0\r\nContent-Transfer-Encoding: 8bit\r\n\r\n"
    )
    return head.encode() + "reject: caf\xe9 closed\r\n".encode("latin-1")
