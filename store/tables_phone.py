"""The phone's tables: Web Push subscriptions, passkeys and the passkey ceremonies' challenges.

A subscription and a passkey each belong to one principal, kept as its `Principal.requester`
key (`owner`, or `token:ID` for a named token's person), so a revoked token's devices stop
with it. A challenge is a row while its ceremony is open, and is deleted by the one
verification that uses it: a replayed answer finds nothing to match.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from pizzabot.store.tables_base import Base


class PushSubscriptionRow(Base):
    __tablename__ = "push_subscriptions"
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    #: The push service's URL for this browser (RFC 8030's push resource).
    endpoint: Mapped[str] = mapped_column(String(2000), unique=True)
    #: The browser's P-256 public key and auth secret (RFC 8291), base64url.
    p256dh: Mapped[str] = mapped_column(String(200))
    auth: Mapped[str] = mapped_column(String(100))
    principal: Mapped[str] = mapped_column(String(300), index=True)
    #: What the page says of the device ("Chrome on Android"), to tell subscriptions apart.
    label: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[datetime]


class PasskeyRow(Base):
    __tablename__ = "passkeys"
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    #: The credential id the authenticator gave, base64url.
    credential_id: Mapped[str] = mapped_column(String(1400), unique=True)
    #: The COSE public key, base64url.
    public_key: Mapped[str] = mapped_column(Text)
    sign_count: Mapped[int] = mapped_column(Integer)
    principal: Mapped[str] = mapped_column(String(300), index=True)
    name: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[datetime]
    last_used_at: Mapped[datetime | None]


class PasskeyChallengeRow(Base):
    __tablename__ = "passkey_challenges"
    nonce: Mapped[str] = mapped_column(String(64), primary_key=True)
    #: "register", "login" or "step_up".
    purpose: Mapped[str] = mapped_column(String(16))
    #: Who asked (register, step_up); None for a login, where nobody is known yet.
    principal: Mapped[str | None] = mapped_column(String(300))
    #: The item a step-up confirms.
    item_id: Mapped[str | None] = mapped_column(String(32))
    expires_at: Mapped[datetime]
