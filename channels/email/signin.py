"""The mail that carries a sign-in link to the web page (`pizzabot.channels.web.mail_signin`).

A mail of its own, in no run's thread, that nobody should answer: the link is the whole
message. It says for which address it was asked, until when it works, and that ignoring it
is safe, since a link nobody follows signs nobody in.
"""

from __future__ import annotations

from datetime import datetime
from email.message import EmailMessage
from email.utils import make_msgid

from pizzabot.channels.email import headers
from pizzabot.channels.email.compose import SUBJECT_TAG, MailIdentity, Thread, _base

__all__ = ["signin_mail"]


def signin_mail(
    *, identity: MailIdentity, to: str, link: str, expires: datetime, now: datetime
) -> EmailMessage:
    """The sign-in mail to `to` with `link`, which works until `expires`."""
    thread = Thread(f"{SUBJECT_TAG} Your sign-in link")
    message_id = make_msgid(idstring="pizzabot-signin", domain=identity.domain)
    msg = _base(identity=identity, to=to, thread=thread, message_id=message_id, now=now)
    msg["Reply-To"] = identity.reply_to(None)
    msg["Auto-Submitted"] = headers.atom("Auto-Submitted", "auto-generated")
    until = expires.strftime("%Y-%m-%d %H:%M UTC")
    msg.set_content(
        f"Someone asked to sign in to Pizza Bot's web page as {to}.\n\n"
        f"Sign in:\n{link}\n\n"
        f"The link works once, until {until}. If you did not ask for it, ignore this mail:\n"
        "nobody signs in without the link.\n\n-- \nPizza Bot\n"
    )
    return msg
