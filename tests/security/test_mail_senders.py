"""A reply decides only from one unambiguous, unforged approver address.

Each attack below holds the strongest thing an outsider can get: the approver's own item
mail (say, forwarded to them), with its valid token. Each used to decide:

- `From: kate@example.test <mallory@example.test>`: the header parser only noted a defect
  and the approver's address was taken;
- two `From` headers: the first was used;
- `dmarc=pass` for another domain (the one of a second From) was taken as a pass;
- `dmarc=none` / `temperror` outweighed an aligned SPF or DKIM `fail`;
- `From: \u212aate@example.test` (KELVIN SIGN) lower-cased to the approver `kate@`.

Each reply carries the receiving server's passing verdict (DMARC for example.test), unless
the attack writes its own: a verdict for the domain does not make an ambiguous From count.
The mails go through the real SMTP and IMAP peers into the real inbound handler.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from email.message import EmailMessage
from email.utils import make_msgid
from pathlib import Path

import pytest

from pizzabot.agent.model import ItemStatus
from tests.peers.email_bot import USERS, EmailBot, email_skill, passed, send
from tests.peers.mailserver import MailServer
from tests.peers.required import require

pytestmark = pytest.mark.mail

KATE = "kate@example.test"
KATE_PW = "kate-pw"
EVIL = "mallory@example.test"


@pytest.fixture(scope="module")
def mail() -> Iterator[MailServer]:
    require("mail")
    with MailServer(users={**USERS, "kate": KATE_PW}) as server:
        yield server


def _ar(results: str) -> str:
    return f"Authentication-Results: mx.example.test; {results}\r\n"


#: What the receiving server writes above a mail whose DMARC check for example.test passed.
VERIFIED = f"Authentication-Results: {passed(KATE)}\r\n"


def _verified(head: str) -> str:
    return head if "Authentication-Results:" in head else VERIFIED + head


ATTACKS: dict[str, Callable[[str], str]] = {
    # name -> the header lines above the rest of the reply, given Kate's token address
    "approver address as display name": lambda _to: f"From: {KATE} <{EVIL}>\r\n",
    "two From headers": lambda _to: f"From: Kate <{KATE}>\r\nFrom: <{EVIL}>\r\n",
    "two mailboxes in From": lambda _to: f"From: {KATE}, {EVIL}\r\n",
    "DMARC pass for another domain": lambda _to: (
        f"From: Kate <{KATE}>\r\n"
        + _ar(f"dmarc=pass header.from=evil.example; spf=fail smtp.mailfrom={KATE}")
    ),
    "dmarc=none over an aligned DKIM fail": lambda _to: (
        f"From: Kate <{KATE}>\r\n"
        + _ar("dmarc=none header.from=example.test; dkim=fail header.d=example.test")
    ),
    "dmarc=temperror over an aligned SPF fail": lambda _to: (
        f"From: Kate <{KATE}>\r\n"
        + _ar(f"dmarc=temperror header.from=example.test; spf=fail smtp.mailfrom={KATE}")
    ),
    "Kelvin sign for k": lambda _to: "From: Kate <\u212aate@example.test>\r\n",
}


@pytest.mark.parametrize("attack", list(ATTACKS))
async def test_an_ambiguous_or_forged_from_decides_nothing(
    attack: str, mail: MailServer, tmp_path: Path
) -> None:
    skill = email_skill(approvers={"email": [KATE]}, deliver={"email": [KATE]})
    async with EmailBot(mail, tmp_path, skill=skill) as bot:
        item = await bot.action()
        leaked = await bot.mail_for(item.id, user="kate", password=KATE_PW)
        to = leaked["Reply-To"].addresses[0].addr_spec
        raw = _reply(leaked, to=to, head=_verified(ATTACKS[attack](to)))
        await send(mail, raw, to=[to])
        outcome = await bot.next_outcome()
        assert not outcome.startswith("decided"), outcome
        assert (await bot.store.get_item(item.id)).status is ItemStatus.PENDING

        # The same reply with Kate's plain From decides: only the From made the difference.
        await send(mail, _reply(leaked, to=to, head=VERIFIED + f"From: Kate <{KATE}>\r\n"), to=[to])
        assert await bot.next_outcome() == "decided: approve"


def _reply(leaked: EmailMessage, *, to: str, head: str) -> bytes:
    return (
        head
        + f"To: {to}\r\nSubject: Re: {leaked['Subject']}\r\n"
        + f"Message-ID: {make_msgid(domain='example.test')}\r\n"
        + f"In-Reply-To: {leaked['Message-ID']}\r\nReferences: {leaked['Message-ID']}\r\n"
        + "MIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n"
        + "Content-Transfer-Encoding: 8bit\r\n\r\napprove\r\n"
    ).encode()
