"""What the email channel needs from the outside, as small protocols.

`channels/` may not import `store/`, so the channel names the store roles it uses, from
`pizzabot.agent.store`: `MailStore` (runs, items and deliveries to read, the audit trail to write; the
run store `pizzabot.store.SqlStore` has them all) and `MailLog`, the one thing no other part of the
server keeps: which mails and links were already handled (`pizzabot.store.mail.SqlMailLog`). Both are
satisfied structurally; nothing here is subclassed. `TokenSource` is what IMAP and SMTP log
in with when the account uses OAuth.
"""

from __future__ import annotations

from typing import Protocol

from pizzabot.agent.store import (
    AuditTrail,
    CardRefresh,
    DeliveryReader,
    ItemReader,
    MailLog,
    RunReader,
)

__all__ = ["MailLog", "MailStore", "TokenSource"]


class MailStore(ItemReader, RunReader, DeliveryReader, AuditTrail, CardRefresh, Protocol):
    """What the email channel reads from the store, and where it audits."""


class TokenSource(Protocol):
    """OAuth access tokens for SASL XOAUTH2 (`pizzabot.channels.email.oauth.OAuthTokens`)."""

    async def token(self) -> str:
        """A valid access token (cached, or refreshed first)."""
        ...

    def invalidate(self, token: str) -> None:
        """The server refused `token`: the next `token()` fetches a new one."""
        ...
