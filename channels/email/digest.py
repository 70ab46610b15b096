"""`EmailDigest`: the daily digest (`pizzabot.agent.digest`) as one plain mail to each approver.

The mail is not on any item's thread and carries no reply token: it lists the waiting items
with links to the web page, and each item's own mail stays the place to answer by reply.
Every header is built from checked text (`pizzabot.channels.email.headers`); the subject holds only
a count.
"""

from __future__ import annotations

from email.message import EmailMessage
from email.policy import SMTP
from email.utils import format_datetime, make_msgid

from pizzabot.agent.digest import Digest
from pizzabot.channels.email import headers
from pizzabot.channels.email.channel import Mailer
from pizzabot.channels.email.compose import SUBJECT_TAG, MailIdentity

__all__ = ["EmailDigest", "digest_mail"]


def digest_mail(digest: Digest, *, identity: MailIdentity, to: str) -> EmailMessage:
    n = len(digest.items)
    msg = EmailMessage(policy=SMTP)
    msg["From"] = identity.sender()
    msg["To"] = headers.mailbox("To", to)
    subject = f"{SUBJECT_TAG} {n} decision{'s' if n != 1 else ''} waiting for you"
    msg["Subject"] = headers.unstructured("Subject", subject)
    msg["Date"] = headers.atom("Date", format_datetime(digest.now))
    msg["Message-ID"] = headers.msg_ids("Message-ID", [make_msgid(domain=identity.domain)])
    footer = "Answer each item on its own mail, in Slack or on the web page."
    msg.set_content("\n".join([*digest.lines(), "", footer]) + "\n")
    return msg


class EmailDigest:
    """Sends digests through the email channel's mailer, as the bot's identity."""

    def __init__(self, *, mailer: Mailer, identity: MailIdentity) -> None:
        self.mailer = mailer
        self.identity = identity

    async def send_digest(self, address: str, digest: Digest) -> None:
        await self.mailer.send(digest_mail(digest, identity=self.identity, to=address))
