"""The server's VAPID key (RFC 8292): how a push service knows the pushes come from this server.

A browser subscribes with the key's public half (the page hands it over as the
`applicationServerKey`), and its push service then takes a push for that subscription only
with a JWT signed by the private half. The key pair is made at first start and kept in the
data folder, readable by the server's user alone (0600); every server process sharing that
folder signs with the same key, so a subscription keeps working across restarts.
"""

from __future__ import annotations

import base64
import logging
import os
import time
from pathlib import Path
from urllib.parse import urlsplit

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from py_vapid import Vapid02

__all__ = ["KEY_FILE", "VapidKey", "vapid_contact"]

log = logging.getLogger(__name__)

#: The key's file in the data folder.
KEY_FILE = "vapid-key.pem"
#: How long a signed JWT is good for: RFC 8292 allows at most 24 hours.
_LIFETIME = 12 * 3600


def vapid_contact(*, contact: str | None, base_url: str) -> str:
    """Where a push service can reach whoever runs the server (VAPID's `sub`): `contact`,
    else the public URL where it is https (push services take mailto: and https: only)."""
    if contact:
        return contact
    return base_url if base_url.startswith("https://") else "mailto:pizzabot@localhost"


class VapidKey:
    """One P-256 key pair, and the `Authorization` header it signs for an endpoint."""

    def __init__(self, private: ec.EllipticCurvePrivateKey, *, contact: str) -> None:
        self._vapid = Vapid02(private_key=private)
        self.contact = contact
        raw = private.public_key().public_bytes(
            serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint
        )
        #: The public key as the page's `applicationServerKey` takes it (base64url, no padding).
        self.public_key = base64.urlsafe_b64encode(raw).rstrip(b"=").decode()

    @classmethod
    def load_or_create(cls, path: Path, *, contact: str) -> VapidKey:
        """The key kept at `path`; made there first (mode 0600) when there is none."""
        if not path.exists():
            private = ec.generate_private_key(ec.SECP256R1())
            pem = private.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            except FileExistsError:  # another process made it a moment ago: use theirs
                pass
            else:
                with os.fdopen(fd, "wb") as f:
                    f.write(pem)
        mode = path.stat().st_mode & 0o777
        if mode & 0o077:
            path.chmod(0o600)
            log.warning("VAPID key %s was open to other users (mode %03o); made it 600", path, mode)
        loaded = serialization.load_pem_private_key(path.read_bytes(), password=None)
        if not isinstance(loaded, ec.EllipticCurvePrivateKey):
            raise ValueError(f"{path} does not hold a P-256 key")
        return cls(loaded, contact=contact)

    def authorization(self, endpoint: str, *, now: float | None = None) -> str:
        """The `Authorization: vapid t=…, k=…` value for a push to `endpoint`: a JWT whose
        audience is the push service's origin, signed for `_LIFETIME` seconds."""
        parts = urlsplit(endpoint)
        claims = {
            "aud": f"{parts.scheme}://{parts.netloc}",
            "exp": int((time.time() if now is None else now) + _LIFETIME),
            "sub": self.contact,
        }
        header: dict[str, str] = self._vapid.sign(claims)
        return header["Authorization"]
