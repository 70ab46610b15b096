"""What the email channel needs from the outside, as small protocols.

`channels/` may not import `store/`, so the channel names the few store methods it calls
(`MailStore`, which `store.SqlStore` already has) and the one thing no other part of the
server keeps: which mails and links were already handled (`MailLog`, implemented by
`store.mail.SqlMailLog`). Both are satisfied structurally; nothing here is subclassed.
`TokenSource` is what IMAP and SMTP log in with when the account uses OAuth.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Protocol

from agent.model import Delivery, Item, Run


class MailStore(Protocol):
    async def get_item(self, item_id: str) -> Item: ...

    async def get_run(self, run_id: str) -> Run: ...

    async def run_deliveries(self, run_id: str, channel: str) -> list[Delivery]: ...

    async def find_delivery(self, channel: str, external_id: str) -> Delivery | None: ...

    async def audit(
        self,
        *,
        action: str,
        actor: str,
        channel: str,
        now: datetime,
        run_id: str | None = None,
        item_id: str | None = None,
        detail: dict[str, Any] | None = None,
    ) -> None: ...


class MailLog(Protocol):
    """Keys of handled mail (Message-IDs) and used links, shared by every server process.

    `claim` is the once-only gate: of two processes claiming one key, exactly one gets True.
    """

    async def claim(self, key: str, *, kind: str, now: datetime) -> bool:
        """Record `key`; False when it was recorded before."""
        ...

    async def release(self, key: str) -> None:
        """Forget `key` (handling failed half-way and should be tried again)."""
        ...

    async def seen(self, key: str) -> bool: ...


class TokenSource(Protocol):
    """OAuth access tokens for SASL XOAUTH2 (`channels.email.oauth.OAuthTokens`)."""

    async def token(self) -> str:
        """A valid access token (cached, or refreshed first)."""
        ...

    def invalidate(self, token: str) -> None:
        """The server refused `token`: the next `token()` fetches a new one."""
        ...
