"""The server's mail key: what makes a decision link or a reply token the server's own.

A decision link and the token in a reply address are both proofs that "the server mailed
this to that person about that item". Such a proof must come from a key that never leaves
the server: nothing derived from a mail (which anyone on the thread, or anyone a copy was
forwarded to, holds) may let someone make another. `pizzabot.bot.wire_email` loads the key from the
settings or keeps one in the data folder (mode 0600); every server process of one
deployment uses the same key.

    reply_token(item, address)  per item and recipient, in that recipient's Reply-To and
                                Message-ID; a reply counts only with the sender's own token
    sign / load                 the signed, expiring claims in decision links (itsdangerous)
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import os
import secrets
import stat
from pathlib import Path
from typing import Any

from itsdangerous import BadSignature, URLSafeSerializer

from pizzabot.channels.email.trust import normalize_address

MIN_KEY_BYTES = 32
log = logging.getLogger(__name__)


class MailKey:
    def __init__(self, secret: bytes) -> None:
        if len(secret) < MIN_KEY_BYTES:
            raise ValueError(f"the mail key needs at least {MIN_KEY_BYTES} bytes")
        # Separate keys per use, so a token can never stand in for a link signature.
        self._reply = hmac.new(secret, b"pizzabot/mail/reply-token", hashlib.sha256).digest()
        self._links = URLSafeSerializer(
            hmac.new(secret, b"pizzabot/mail/link", hashlib.sha256).digest(),
            salt="pizzabot.mail.decision-link",
            signer_kwargs={"digest_method": hashlib.sha256},
        )

    @staticmethod
    def generate() -> bytes:
        return secrets.token_bytes(MIN_KEY_BYTES)

    def reply_token(self, item_id: str, address: str, version: int = 1) -> str:
        """The token for `address` on `item_id` as its card shows version `version`: 26
        lower-case base32 characters (130 bits), so a mail server that lower-cases local
        parts does not break it. An edit moves the item to a new version, and the mails of
        the old one carry a token that no longer decides it."""
        who = normalize_address(address) or "\0invalid"
        # Version 1 is the item as first asked: its token is the one mails always carried.
        bound = f"{item_id}\0{who}" if version == 1 else f"{item_id}\0{who}\0v{version}"
        mac = hmac.new(self._reply, bound.encode(), hashlib.sha256).digest()
        return base64.b32encode(mac[:20]).decode().lower().rstrip("=")[:26]

    def sign(self, claim: dict[str, Any]) -> str:
        return self._links.dumps(claim)

    def load(self, token: str) -> Any:
        """The claim in `token`; `BadSignature` when the server did not sign it."""
        return self._links.loads(token)


__all__ = ["BadSignature", "MailKey"]


def kept_key(path: Path) -> str:
    """The key kept at `path`, made (0600, atomically: other processes may race) if missing."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        spare = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
        fd = os.open(spare, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_urlsafe(48) + "\n")
        try:
            os.link(spare, path)  # fails if another process was first: theirs is kept
        except FileExistsError:
            pass
        finally:
            spare.unlink()
    if path.stat().st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        log.warning("Email: %s is readable by others; it should be mode 0600", path)
    return path.read_text().strip()
