"""A software passkey for tests that run without a browser: it answers WebAuthn options as an
authenticator would (a P-256 key per credential, "none" attestation, a signature counter),
so the relying party (`pizzabot.agent.passkeys`) is tested on real signatures, and on what no honest
authenticator sends: a counter that went back (a clone), an answer given twice.

    key = SoftPasskey(origin="http://localhost:8787")
    credential = key.create(options)          # JSON text, as the page posts it
    assertion = key.get(options)              # JSON text, signed, counter + 1
"""

from __future__ import annotations

import base64
import copy
import hashlib
import json
import secrets
import struct
from dataclasses import dataclass, field
from typing import Any

import cbor2
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec

_UP, _UV, _AT = 0x01, 0x04, 0x40


def b64url(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


@dataclass
class SoftPasskey:
    """One authenticator holding one credential for one site."""

    origin: str
    rp_id: str = "localhost"
    counter: int = 0
    credential_id: bytes = field(default_factory=lambda: secrets.token_bytes(16))
    private: ec.EllipticCurvePrivateKey = field(
        default_factory=lambda: ec.generate_private_key(ec.SECP256R1())
    )

    def create(self, options: dict[str, Any]) -> str:
        """The credential `navigator.credentials.create` would give for `options`."""
        numbers = self.private.public_key().public_numbers()
        cose = {1: 2, 3: -7, -1: 1, -2: numbers.x.to_bytes(32), -3: numbers.y.to_bytes(32)}
        attested = bytes(16) + struct.pack(">H", len(self.credential_id)) + self.credential_id
        auth = self._auth_data(_UP | _UV | _AT) + attested + cbor2.dumps(cose)
        client = self._client("webauthn.create", options["challenge"])
        attestation = cbor2.dumps({"fmt": "none", "attStmt": {}, "authData": auth})
        response = {"clientDataJSON": b64url(client), "attestationObject": b64url(attestation)}
        return self._json(response)

    def get(self, options: dict[str, Any], *, counter: int | None = None) -> str:
        """The assertion `navigator.credentials.get` would give; the counter moves on by one
        (or is `counter`, as a clone's would be)."""
        self.counter = self.counter + 1 if counter is None else counter
        auth = self._auth_data(_UP | _UV)
        client = self._client("webauthn.get", options["challenge"])
        signature = self.private.sign(
            auth + hashlib.sha256(client).digest(), ec.ECDSA(hashes.SHA256())
        )
        response = {
            "clientDataJSON": b64url(client),
            "authenticatorData": b64url(auth),
            "signature": b64url(signature),
        }
        return self._json(response)

    def clone(self) -> SoftPasskey:
        """Another authenticator with the same key and counter (what a cloned one is)."""
        return copy.deepcopy(self)

    def _auth_data(self, flags: int) -> bytes:
        rp_hash = hashlib.sha256(self.rp_id.encode()).digest()
        return rp_hash + bytes([flags]) + struct.pack(">I", self.counter)

    def _client(self, kind: str, challenge: str) -> bytes:
        data = {"type": kind, "challenge": challenge, "origin": self.origin, "crossOrigin": False}
        return json.dumps(data).encode()

    def _json(self, response: dict[str, Any]) -> str:
        cid = b64url(self.credential_id)
        return json.dumps(
            {
                "id": cid,
                "rawId": cid,
                "type": "public-key",
                "response": response,
                "clientExtensionResults": {},
            }
        )
