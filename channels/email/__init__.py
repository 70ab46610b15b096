"""The email channel: inbox items out by SMTP, decisions and follow-ups back by IMAP.

    EmailChannel   the `pizzabot.agent.channel.Channel`: deliver / update (SMTP, one thread per run)
    MailHandler    one received mail -> Inbox.decide / Runs.follow_up / Runs.start
    ImapReceiver   the IMAP IDLE loop that feeds MailHandler, reconnecting with backoff
    LinkDesk       the one-time, prefetch-safe decision links (`links_router` mounts them)
    MailKey        the server's key for decision links and per-recipient reply tokens
    MailLog        the protocol for "already handled" keys (store.mail.SqlMailLog)
    MailTrust      which received mail is believed to come from its From (channels.email.trust)

`pizzabot.bot.wire_email` builds these from the settings; nothing here reads the environment.
"""

from pizzabot.channels.email.channel import EmailChannel, Mailer, SmtpConfig, SmtpMailer
from pizzabot.channels.email.compose import MailIdentity
from pizzabot.channels.email.inbound import InboundConfig, MailHandler
from pizzabot.channels.email.keys import MailKey
from pizzabot.channels.email.links import LinkDesk, links_router
from pizzabot.channels.email.ports import MailLog, MailStore
from pizzabot.channels.email.receiver import ImapConfig, ImapReceiver
from pizzabot.channels.email.trust import MailTrust

__all__ = [
    "EmailChannel",
    "ImapConfig",
    "ImapReceiver",
    "InboundConfig",
    "LinkDesk",
    "MailHandler",
    "MailIdentity",
    "MailKey",
    "MailLog",
    "MailStore",
    "MailTrust",
    "Mailer",
    "SmtpConfig",
    "SmtpMailer",
    "links_router",
]
