"""Named tokens in SQL: kept as hashes, looked up on every request, listed and revoked.

Every change is one transaction with its audit entry (`token_created`, `token_revoked`).
A lookup reads the row each time, so a revoke holds at once on every server sharing the
database. Implements `pizzabot.agent.policy.tokens.Tokens`, through the run store's `Database`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, cast

from sqlalchemy import Connection, Table, insert, select, update

from pizzabot.agent.errors import Conflict, NotFound
from pizzabot.agent.policy.principal import Scope
from pizzabot.agent.policy.tokens import Token
from pizzabot.store.audit import insert_audit
from pizzabot.store.database import Database
from pizzabot.store.tables_tokens import TokenRow

TOKENS = cast(Table, TokenRow.__table__)


def token_of(row: Any) -> Token:
    return Token(
        id=row.id,
        name=row.name,
        scope=Scope(row.scope),
        person=row.person,
        created_at=row.created_at,
        created_by=row.created_by,
        revoked_at=row.revoked_at,
        revoked_by=row.revoked_by,
    )


def _detail(token: Token) -> dict[str, Any]:
    return {
        "token": token.id,
        "name": token.name,
        "scope": str(token.scope),
        "person": token.person,
    }


class SqlTokens:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def add(self, token: Token, *, secret_hash: str, channel: str) -> Token:
        taken = select(TOKENS.c.id).where(
            TOKENS.c.name == token.name, TOKENS.c.revoked_at.is_(None)
        )
        made = insert(TOKENS).values(
            id=token.id,
            name=token.name,
            scope=str(token.scope),
            person=token.person,
            hash=secret_hash,
            created_at=token.created_at,
            created_by=token.created_by,
        )

        def tx(c: Connection) -> Token:
            if c.execute(taken).first() is not None:
                raise Conflict(
                    f"a token named {token.name!r} is in use: revoke it or pick another name"
                )
            c.execute(made)
            insert_audit(
                c,
                action="token_created",
                actor=token.created_by,
                channel=channel,
                now=token.created_at,
                detail=_detail(token),
            )
            return token

        return await self.db.run(tx)

    async def by_hash(self, secret_hash: str) -> Token | None:
        q = select(TOKENS).where(TOKENS.c.hash == secret_hash, TOKENS.c.revoked_at.is_(None))

        def tx(c: Connection) -> Token | None:
            row = c.execute(q).first()
            return token_of(row) if row is not None else None

        return await self.db.read(tx)

    async def by_id(self, token_id: str) -> Token | None:
        q = select(TOKENS).where(TOKENS.c.id == token_id, TOKENS.c.revoked_at.is_(None))

        def tx(c: Connection) -> Token | None:
            row = c.execute(q).first()
            return token_of(row) if row is not None else None

        return await self.db.read(tx)

    async def list_tokens(self) -> list[Token]:
        q = select(TOKENS).order_by(TOKENS.c.created_at.desc(), TOKENS.c.id.desc())

        def tx(c: Connection) -> list[Token]:
            return [token_of(r) for r in c.execute(q)]

        return await self.db.read(tx)

    async def revoke(self, token_id: str, *, actor: str, channel: str, now: datetime) -> Token:
        revoke = (
            update(TOKENS)
            .where(TOKENS.c.id == token_id, TOKENS.c.revoked_at.is_(None))
            .values(revoked_at=now, revoked_by=actor)
        )

        def tx(c: Connection) -> Token:
            done = c.execute(revoke).rowcount
            row = c.execute(select(TOKENS).where(TOKENS.c.id == token_id)).first()
            if row is None:
                raise NotFound(f"no token {token_id}")
            token = token_of(row)
            if done:
                insert_audit(
                    c,
                    action="token_revoked",
                    actor=actor,
                    channel=channel,
                    now=now,
                    detail=_detail(token),
                )
            return token

        return await self.db.run(tx)
