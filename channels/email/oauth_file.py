"""The newest OAuth refresh token, kept in the data folder (0600) when the provider rotates
it, so a restart logs in with that one and not with the configured one the provider has
already retired. A change of the configured token (a new consent) makes it the newest again.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import secrets
from pathlib import Path

log = logging.getLogger(__name__)


def _fingerprint(refresh_token: str) -> str:
    return hashlib.sha256(refresh_token.encode()).hexdigest()


class RotatedToken:
    def __init__(self, path: Path, configured: str) -> None:
        self.path = path
        self.configured = configured

    def newest(self) -> str | None:
        """The newest refresh token kept for the configured one; None when there is none or
        the configured one changed since (then the configured one is newer)."""
        try:
            kept = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return None
        if not isinstance(kept, dict) or kept.get("configured") != _fingerprint(self.configured):
            return None
        token = kept.get("token")
        return token if isinstance(token, str) and token else None

    def keep(self, token: str) -> None:
        """Keep `token` as the newest (atomically); a failure is logged, not raised: the
        login it came from has worked."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            spare = self.path.with_name(f".{self.path.name}.{os.getpid()}.{secrets.token_hex(4)}")
            fd = os.open(spare, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as f:
                json.dump({"configured": _fingerprint(self.configured), "token": token}, f)
            os.replace(spare, self.path)
        except OSError as exc:
            log.warning(
                "Email: cannot keep the rotated OAuth refresh token in %s: %s", self.path, exc
            )
