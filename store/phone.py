"""SQL for the phone: Web Push subscriptions, passkeys and the passkeys' open ceremonies.

Implements `pizzabot.agent.devices.Subscriptions` and `pizzabot.agent.devices.PasskeyStore`
through the run store's `Database`. Every change a person would want to find later (a device subscribed or
removed, a passkey registered or removed) is one transaction with its audit entry. A passkey's
counter only moves forward, by a conditional update, so two uses of one assertion cannot both
pass; a ceremony's challenge is deleted by the read that uses it.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, cast

from sqlalchemy import Connection, Table, delete, insert, select, update

from pizzabot.agent.addresses import PushTarget
from pizzabot.agent.devices import Challenge, StoredPasskey, Subscription
from pizzabot.agent.errors import Conflict
from pizzabot.store.audit import insert_audit
from pizzabot.store.database import Database
from pizzabot.store.outbox import insert_deliveries
from pizzabot.store.tables import DeliveryRow
from pizzabot.store.tables_phone import PasskeyChallengeRow, PasskeyRow, PushSubscriptionRow

SUBS = cast(Table, PushSubscriptionRow.__table__)
KEYS = cast(Table, PasskeyRow.__table__)
CHALLENGES = cast(Table, PasskeyChallengeRow.__table__)


def _subscription(row: Any) -> Subscription:
    return Subscription(
        id=row.id,
        endpoint=row.endpoint,
        p256dh=row.p256dh,
        auth=row.auth,
        principal=row.principal,
        label=row.label,
        created_at=row.created_at,
    )


def _passkey(row: Any) -> StoredPasskey:
    return StoredPasskey(
        id=row.id,
        credential_id=row.credential_id,
        public_key=row.public_key,
        sign_count=row.sign_count,
        principal=row.principal,
        name=row.name,
        created_at=row.created_at,
        last_used_at=row.last_used_at,
    )


class SqlSubscriptions:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def add(self, sub: Subscription, *, actor: str, channel: str) -> Subscription:
        def tx(c: Connection) -> Subscription:
            old = c.execute(select(SUBS.c.id).where(SUBS.c.endpoint == sub.endpoint)).first()
            kept = sub if old is None else Subscription(**{**vars(sub), "id": old.id})
            values = {k: v for k, v in vars(kept).items() if k != "id"}
            if old is None:
                c.execute(insert(SUBS).values(id=kept.id, **values))
            else:
                c.execute(update(SUBS).where(SUBS.c.id == old.id).values(**values))
            detail = {"subscription": kept.id, "device": kept.label, "holder": kept.principal}
            insert_audit(
                c,
                action="push_subscribed",
                actor=actor,
                channel=channel,
                now=kept.created_at,
                detail=detail,
            )
            return kept

        return await self.db.run(tx)

    async def get(self, sub_id: str) -> Subscription | None:
        def tx(c: Connection) -> Subscription | None:
            row = c.execute(select(SUBS).where(SUBS.c.id == sub_id)).first()
            return _subscription(row) if row is not None else None

        return await self.db.read(tx)

    async def list_subscriptions(self, principal: str | None = None) -> list[Subscription]:
        query = select(SUBS).order_by(SUBS.c.created_at.desc(), SUBS.c.id)
        if principal is not None:
            query = query.where(SUBS.c.principal == principal)

        def tx(c: Connection) -> list[Subscription]:
            return [_subscription(r) for r in c.execute(query)]

        return await self.db.read(tx)

    async def remove(
        self, sub_id: str, *, actor: str, channel: str, why: str, now: datetime
    ) -> bool:
        def tx(c: Connection) -> bool:
            row = c.execute(select(SUBS).where(SUBS.c.id == sub_id)).first()
            if row is None:
                return False
            c.execute(delete(SUBS).where(SUBS.c.id == sub_id))
            insert_audit(
                c,
                action="push_unsubscribed",
                actor=actor,
                channel=channel,
                now=now,
                detail={"subscription": sub_id, "device": row.label, "why": why},
            )
            return True

        return await self.db.run(tx)

    async def fan_out(
        self, *, item_id: str, run_id: str, sub_ids: Sequence[str], now: datetime
    ) -> int:
        targets = [PushTarget(s) for s in sub_ids]

        def tx(c: Connection) -> int:
            insert_deliveries(c, item_id=item_id, run_id=run_id, targets=targets, now=now)
            return len(targets)

        return await self.db.run(tx)

    async def item_of(self, delivery_id: str) -> str | None:
        query = select(DeliveryRow.item_id).where(
            DeliveryRow.id == delivery_id, DeliveryRow.channel == "push"
        )

        def tx(c: Connection) -> str | None:
            row = c.execute(query).first()
            return str(row.item_id) if row is not None else None

        return await self.db.read(tx)


class SqlPasskeys:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def add(self, key: StoredPasskey, *, actor: str, channel: str) -> StoredPasskey:
        def tx(c: Connection) -> StoredPasskey:
            taken = select(KEYS.c.id).where(KEYS.c.credential_id == key.credential_id)
            if c.execute(taken).first() is not None:
                raise Conflict("this passkey is registered already")
            c.execute(insert(KEYS).values(**vars(key)))
            insert_audit(
                c,
                action="passkey_registered",
                actor=actor,
                channel=channel,
                now=key.created_at,
                detail={"passkey": key.id, "name": key.name, "holder": key.principal},
            )
            return key

        return await self.db.run(tx)

    async def by_credential(self, credential_id: str) -> StoredPasskey | None:
        def tx(c: Connection) -> StoredPasskey | None:
            row = c.execute(select(KEYS).where(KEYS.c.credential_id == credential_id)).first()
            return _passkey(row) if row is not None else None

        return await self.db.read(tx)

    async def list_passkeys(self, principal: str) -> list[StoredPasskey]:
        query = (
            select(KEYS)
            .where(KEYS.c.principal == principal)
            .order_by(KEYS.c.created_at.desc(), KEYS.c.id)
        )

        def tx(c: Connection) -> list[StoredPasskey]:
            return [_passkey(r) for r in c.execute(query)]

        return await self.db.read(tx)

    async def remove(
        self, passkey_id: str, *, principal: str, actor: str, channel: str, now: datetime
    ) -> bool:
        mine = (KEYS.c.id == passkey_id) & (KEYS.c.principal == principal)

        def tx(c: Connection) -> bool:
            row = c.execute(select(KEYS).where(mine)).first()
            if row is None:
                return False
            c.execute(delete(KEYS).where(mine))
            insert_audit(
                c,
                action="passkey_removed",
                actor=actor,
                channel=channel,
                now=now,
                detail={"passkey": passkey_id, "name": row.name, "holder": principal},
            )
            return True

        return await self.db.run(tx)

    async def used(self, passkey_id: str, *, was: int, now_count: int, at: datetime) -> bool:
        moved = (
            update(KEYS)
            .where(KEYS.c.id == passkey_id, KEYS.c.sign_count == was)
            .values(sign_count=now_count, last_used_at=at)
        )

        def tx(c: Connection) -> bool:
            return bool(c.execute(moved).rowcount)

        return await self.db.run(tx)

    async def open(self, challenge: Challenge, *, now: datetime) -> None:
        def tx(c: Connection) -> None:
            c.execute(delete(CHALLENGES).where(CHALLENGES.c.expires_at < now))
            c.execute(insert(CHALLENGES).values(**vars(challenge)))

        await self.db.run(tx)

    async def take(self, nonce: str, *, purpose: str, now: datetime) -> Challenge | None:
        found = select(CHALLENGES).where(CHALLENGES.c.nonce == nonce)

        def tx(c: Connection) -> Challenge | None:
            row = c.execute(found).first()
            if row is None:
                return None
            # Deleted whatever it was for: a nonce is tried once.
            if not c.execute(delete(CHALLENGES).where(CHALLENGES.c.nonce == nonce)).rowcount:
                return None
            if row.purpose != purpose or row.expires_at <= now:
                return None
            return Challenge(
                nonce=row.nonce,
                purpose=row.purpose,
                principal=row.principal,
                item_id=row.item_id,
                expires_at=row.expires_at,
            )

        return await self.db.run(tx)
