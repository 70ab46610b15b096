"""Mail is believed only with a trusted verdict: a real `pizzabot serve`, the scripted model,
and the real SMTP + IMAP peer.

Anyone can write `From: alice@…`. The receiving server checks the sender (DMARC, DKIM, SPF)
and writes its verdict on top of the mail as `Authentication-Results`, under its
authserv-id. By default the bot believes a mail — a reply that decides, or a mail that
starts or follows up a run — only when the topmost such header from the configured server
(`PIZZABOT_EMAIL_AUTHSERV_ID`) holds a passing verdict aligned with the From domain.

- A forged `From: <allowed sender>` without that header, with another server's header, with
  a pass for another domain, or with a failed check starts no run; each refusal is audited
  with its reason. With a passing verdict from the configured server the same mail does.
- A leaked item mail answered under the approver's forged From, carrying the approver's own
  token, decides nothing without the verdict, and decides with it.
- Without an authserv-id the server says at start exactly what to set, and no mail decides.
- `PIZZABOT_EMAIL_TRUST=mailbox` (for a server that rejects spoofed mail itself) believes
  mail without a verdict, still refuses one that says forged, and warns at start.
"""

from __future__ import annotations

from collections.abc import Iterator
from email.message import EmailMessage
from email.utils import make_msgid
from pathlib import Path
from typing import Any

import aiosmtplib
import pytest

from tests.e2e.test_email_e2e import SKILL, answer_to, item_mail, text_of, three_mails_then_report
from tests.e2e.test_email_e2e import env as mail_env
from tests.peers.email_bot import AUTHSERV_ID, passed, reply_to
from tests.peers.mailserver import DEFAULT_USERS, MailServer
from tests.peers.required import require
from tests.peers.stack import Stack
from tests.waiting import eventually

pytestmark = pytest.mark.mail

ALICE = "alice@example.test"
ALICE_PW = DEFAULT_USERS["alice"]


@pytest.fixture
def mail() -> Iterator[MailServer]:
    """A mail server of the test's own: the bot's mailbox starts empty."""
    require("mail")
    with MailServer() as server:
        yield server


def new_run_mail(subject: str, *, auth_results: str | None) -> EmailMessage:
    """A mail to the bot that starts a run, `From: Alice`, as delivered: with the receiving
    server's `Authentication-Results` on top, or none."""
    msg = EmailMessage()
    if auth_results is not None:
        msg["Authentication-Results"] = auth_results
    msg["From"] = f"Alice <{ALICE}>"
    msg["To"] = "bot@example.test"
    msg["Subject"] = f"[test] {subject}"
    msg["Message-ID"] = make_msgid(domain="example.test")
    msg.set_content("Three copies, please.")
    return msg


async def send(mail: MailServer, msg: EmailMessage) -> None:
    await aiosmtplib.send(msg, hostname=mail.host, port=mail.smtp_port)


async def refusals(st: Stack, count: int) -> list[dict[str, Any]]:
    """The server's `email_refused` audit rows, once there are `count` of them (oldest first)."""

    async def listed() -> list[dict[str, Any]] | None:
        async with st.client() as c:
            rows = (await c.get("/api/audit")).json()["items"]
        found = [r for r in rows if r["action"] == "email_refused"]
        return sorted(found, key=lambda r: r["id"]) if len(found) >= count else None

    return await eventually(listed, what=f"{count} refused mails in the audit", timeout=30)


async def email_runs(st: Stack) -> list[dict[str, Any]]:
    async with st.client() as c:
        runs = (await c.get("/api/runs")).json()["items"]
    return [r for r in runs if r["trigger"] == "email"]


def why(row: dict[str, Any]) -> str:
    reasons = row["detail"]["why"]
    return " ".join(reasons) if isinstance(reasons, list) else str(reasons)


async def test_a_forged_allowed_sender_starts_no_run_without_a_passing_verdict(
    mail: MailServer, tmp_path: Path
) -> None:
    forged = {
        "no header": (None, f"no Authentication-Results from {AUTHSERV_ID}"),
        "another server": (
            "mx.google.com; dmarc=pass header.from=example.test",
            "come from another server (mx.google.com)",
        ),
        "not aligned": (
            f"{AUTHSERV_ID}; dkim=pass header.d=evil.test; dmarc=pass header.from=evil.test",
            "no passing DMARC, DKIM or SPF result aligned with the From domain example.test",
        ),
        "failed": (
            f"{AUTHSERV_ID}; dmarc=fail (p=none) header.from=example.test",
            "DMARC failed for the From domain",
        ),
    }
    async with Stack(
        tmp_path, script=three_mails_then_report, skill=SKILL, env=mail_env(mail)
    ) as st:
        sent = {}
        for name, (header, _) in forged.items():
            sent[name] = new_run_mail(f"forged: {name}", auth_results=header)
            await send(mail, sent[name])
        rows = await refusals(st, len(forged))
        assert await email_runs(st) == []
        by_subject = {r["detail"]["subject"]: r for r in rows}
        for name, (_, reason) in forged.items():
            row = by_subject[f"[test] forged: {name}"]
            assert row["actor"] == ALICE and row["channel"] == "email"
            assert reason in why(row), (name, why(row))
        # Alice, whose address was used, is told her address did not start anything.
        told = await answer_to(mail, sent["no header"])
        assert "Your mail was not acted on" in text_of(told)

        # The same mail with the configured server's passing verdict starts the run.
        good = new_run_mail("verified", auth_results=passed(ALICE))
        await send(mail, good)
        ack = await answer_to(mail, good)
        assert "Started run" in text_of(ack)
        [run] = await email_runs(st)
        assert run["input"].startswith("verified")


async def test_a_leaked_item_mail_under_a_forged_from_decides_nothing(
    mail: MailServer, tmp_path: Path
) -> None:
    async with Stack(
        tmp_path, script=three_mails_then_report, skill=SKILL, env=mail_env(mail)
    ) as st:
        [line] = [x for x in st.server.log().splitlines() if x.startswith("  mail:")]
        assert line.endswith(f"aligned DMARC, DKIM or SPF verdict in {AUTHSERV_ID}'s results")
        run = await st.start_run("test", "send the quotes")
        item = await st.wait_item(run["id"])
        leaked = await item_mail(mail, item["id"])  # Alice's own copy, with her token

        # Whoever holds it answers as Alice: the token is right, the sender unverified.
        forged = reply_to(leaked, "approve", verify=False)
        await send(mail, forged)
        [row] = await refusals(st, 1)
        assert row["item_id"] == item["id"] and row["actor"] == ALICE
        assert f"no Authentication-Results from {AUTHSERV_ID}" in why(row)
        assert "token" not in why(row)
        assert (await st.wait_item(run["id"]))["status"] == "pending"
        assert [e for e in (await st.get_run(run["id"]))["events"] if e["kind"] == "decision"] == []

        # Alice's real reply carries the receiving server's passing verdict: it decides.
        await send(mail, reply_to(leaked, "approve"))
        second = await st.wait_item(run["id"], count=2)
        assert second["id"] != item["id"]
        async with st.client() as c:
            first = (await c.get(f"/api/items/{item['id']}")).json()
        assert first["status"] == "approved" and first["decided_by"] == ALICE


async def test_without_an_authserv_id_the_server_says_what_to_set_and_no_mail_decides(
    mail: MailServer, tmp_path: Path
) -> None:
    env = mail_env(mail)
    del env["PIZZABOT_EMAIL_AUTHSERV_ID"]
    async with Stack(tmp_path, script=three_mails_then_report, skill=SKILL, env=env) as st:
        start = st.server.log().splitlines()
        [line] = [x for x in start if x.startswith("  mail:")]
        assert "no mail can decide or start runs until PIZZABOT_EMAIL_AUTHSERV_ID" in line
        assert "PIZZABOT_EMAIL_TRUST=mailbox" in line

        run = await st.start_run("test", "send the quotes")
        item = await st.wait_item(run["id"])
        got = await item_mail(mail, item["id"])
        # Even a passing verdict counts for nothing while no server is named to trust.
        await send(mail, reply_to(got, "approve"))
        [row] = await refusals(st, 1)
        assert "not told which receiving server" in why(row)
        assert (await st.wait_item(run["id"]))["status"] == "pending"
        log = st.server.log()
    assert "WARNING" in log and "set PIZZABOT_EMAIL_AUTHSERV_ID" in log


async def test_the_mailbox_rule_believes_the_mailbox_and_warns_at_start(
    mail: MailServer, tmp_path: Path
) -> None:
    env = mail_env(mail)
    del env["PIZZABOT_EMAIL_AUTHSERV_ID"]
    env["PIZZABOT_EMAIL_TRUST"] = "mailbox"
    async with Stack(tmp_path, script=three_mails_then_report, skill=SKILL, env=env) as st:
        [line] = [x for x in st.server.log().splitlines() if x.startswith("  mail:")]
        assert line.startswith("  mail:    WARNING:") and "PIZZABOT_EMAIL_TRUST=mailbox" in line

        run = await st.start_run("test", "send the quotes")
        item = await st.wait_item(run["id"])
        got = await item_mail(mail, item["id"])
        # A verdict that says forged is still refused.
        forged = reply_to(
            got,
            "approve",
            headers={
                "Authentication-Results": "mx.example.test; dmarc=fail header.from=example.test"
            },
        )
        await send(mail, forged)
        [row] = await refusals(st, 1)
        assert "DMARC failed" in why(row)
        # No verdict at all: the mailbox's server is trusted to have refused a forgery.
        await send(mail, reply_to(got, "approve", verify=False))
        second = await st.wait_item(run["id"], count=2)
        assert second["id"] != item["id"]
        log = st.server.log()
    assert "WARNING" in log and "Use it only when the mailbox's server rejects spoofed" in log
