"""The audit trail as a chain: each row carries the hash of the row before it.

A row's hash is SHA-256 over a canonical serialisation of its fields, its place in the chain
(`seq`) and the previous row's hash. Every audit write first moves the one-row head
(`audit_head`) on, in the same transaction as the row: on PostgreSQL that UPDATE holds the
head's row lock until COMMIT, on SQLite it takes the database's write lock, so writers in
any number of processes append one after another and the chain never forks. An edited row no
longer matches its hash, a removed one leaves a gap, a reordered one is out of place, and the
head says where the chain ends.

Someone who can write the database could recompute every hash after an edit. Checkpoints
stop that: now and then the head's place and hash are signed (HMAC-SHA256, each checkpoint
over the one before too) with a key that is kept in a file beside the database, never in it;
a chain rewritten from an edited row onwards no longer matches the checkpoints after it.
`pizzabot.store.chain_verify` reads it all back.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import json
import logging
import os
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

from sqlalchemy import Connection, Table, bindparam, insert, select, update
from sqlalchemy.exc import SQLAlchemyError

from pizzabot.store.database import Database
from pizzabot.store.direct import sqlite_rows
from pizzabot.store.tables import AuditRow
from pizzabot.store.tables_audit import AuditCheckpointRow, AuditHeadRow

log = logging.getLogger(__name__)

AUDIT = cast(Table, AuditRow.__table__)
HEAD = cast(Table, AuditHeadRow.__table__)
CHECKPOINTS = cast(Table, AuditCheckpointRow.__table__)

#: The hash before the first row.
GENESIS = "0" * 64
#: The serialisation's version, inside what is hashed: a later form can never be mistaken for it.
_FORM = 1

_BUMP = (
    update(HEAD).where(HEAD.c.id == 1).values(seq=HEAD.c.seq + 1).returning(HEAD.c.seq, HEAD.c.hash)
)
_SET_HEAD = update(HEAD).where(HEAD.c.id == 1).values(hash=bindparam("hash"))
_COLUMNS = ("at", "action", "actor", "channel", "run_id", "item_id", "detail")
_INSERT = insert(AUDIT).values({n: bindparam(n) for n in (*_COLUMNS, "seq", "prev_hash", "hash")})


class ChainError(Exception):
    """The audit chain cannot be written or read as it stands (its head is missing, its
    key unreadable): say so rather than write an audit row outside the chain."""


def _canonical(value: Any) -> bytes:
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str
    ).encode()


def _iso(at: datetime) -> str:
    if at.tzinfo is None:
        at = at.replace(tzinfo=UTC)
    return at.astimezone(UTC).isoformat(timespec="microseconds")


def row_hash(
    *,
    seq: int,
    prev: str,
    at: datetime,
    action: str,
    actor: str,
    channel: str,
    run_id: str | None,
    item_id: str | None,
    detail: dict[str, Any] | None,
) -> str:
    """The hash of one audit row: what it says, where it stands and what came before."""
    fields = {
        "v": _FORM,
        "seq": seq,
        "prev": prev,
        "at": _iso(at),
        "action": action,
        "actor": actor,
        "channel": channel,
        "run_id": run_id,
        "item_id": item_id,
        # As the JSON column gives it back: keys as strings, tuples as lists.
        "detail": json.loads(json.dumps(detail or {})),
    }
    return hashlib.sha256(_canonical(fields)).hexdigest()


def hash_of(row: Any, *, prev: str) -> str:
    """`row_hash` of a row as read back (anything with the audit table's columns)."""
    return row_hash(
        seq=row.seq,
        prev=prev,
        at=row.at,
        action=row.action,
        actor=row.actor,
        channel=row.channel,
        run_id=row.run_id,
        item_id=row.item_id,
        detail=row.detail,
    )


def append(c: Connection, values: dict[str, Any]) -> None:
    """Write one audit row (`at`, `action`, `actor`, `channel`, `run_id`, `item_id`,
    `detail`) as the chain's next, in `c`'s transaction; the head is held until it ends."""
    # SQLite: on `sqlite3` itself, in `c`'s transaction (`pizzabot.store.direct`), as a
    # run's appends are; an audited decision is on the way from a person to the tool.
    sqlite = c.dialect.name == "sqlite"
    head = next(iter(sqlite_rows(c, _BUMP, {})), None) if sqlite else c.execute(_BUMP).first()
    if head is None:
        raise ChainError("the audit chain has no head row: run `pizzabot audit verify`")
    seq, prev = head
    row = {**{n: values.get(n) for n in _COLUMNS}, "seq": seq, "prev_hash": prev}
    row["hash"] = row_hash(
        seq=seq,
        prev=prev,
        at=values["at"],
        action=values["action"],
        actor=values["actor"],
        channel=values["channel"],
        run_id=values.get("run_id"),
        item_id=values.get("item_id"),
        detail=values.get("detail"),
    )
    for statement, params in ((_INSERT, row), (_SET_HEAD, {"hash": row["hash"]})):
        if sqlite:
            sqlite_rows(c, statement, params)
        else:
            c.execute(statement, params)


# -- checkpoints ----------------------------------------------------------------------------


def checkpoint_mac(key: bytes, *, seq: int, hash: str, at: datetime, prev_mac: str) -> str:
    """The signature of a checkpoint, over the one before it too (none: `GENESIS`)."""
    body = _canonical({"v": _FORM, "seq": seq, "hash": hash, "at": _iso(at), "prev": prev_mac})
    return hmac.new(key, body, hashlib.sha256).hexdigest()


@dataclass(frozen=True)
class Checkpoint:
    seq: int
    hash: str
    at: datetime


def write_checkpoint(c: Connection, *, key: bytes, now: datetime) -> Checkpoint | None:
    """Sign the chain's head as it stands, unless nothing was written since the last
    checkpoint. The head is read under its lock, so no row is half-way into the chain."""
    head = c.execute(
        select(HEAD.c.seq, HEAD.c.hash).where(HEAD.c.id == 1).with_for_update()
    ).first()
    if head is None:
        raise ChainError("the audit chain has no head row: run `pizzabot audit verify`")
    last = c.execute(
        select(CHECKPOINTS.c.seq, CHECKPOINTS.c.mac).order_by(CHECKPOINTS.c.id.desc()).limit(1)
    ).first()
    if head.seq == 0 or (last is not None and last.seq == head.seq):
        return None
    mac = checkpoint_mac(
        key, seq=head.seq, hash=head.hash, at=now, prev_mac=last.mac if last else GENESIS
    )
    c.execute(insert(CHECKPOINTS), {"seq": head.seq, "hash": head.hash, "at": now, "mac": mac})
    return Checkpoint(seq=head.seq, hash=head.hash, at=now)


async def keep_checkpointing(
    db: Database,
    *,
    key: bytes,
    every: float,
    clock: Callable[[], datetime],
    sleep: Callable[[float], Awaitable[None]],
) -> None:
    """Sign the head at once, then every `every` seconds, until cancelled. A failed try (the
    database away for a while) is logged and tried again next time; the key is never logged."""
    while True:
        try:
            await db.run(functools.partial(write_checkpoint, key=key, now=clock()))
        except (ChainError, SQLAlchemyError, OSError) as exc:
            log.warning("audit checkpoint not written: %s", type(exc).__name__)
        await sleep(every)


# -- the key --------------------------------------------------------------------------------

_KEY_BYTES = 32


def read_key(path: Path) -> bytes:
    """The checkpoint key kept in `path` (hex). A missing or malformed file is a `ChainError`
    that names the path, never the key."""
    try:
        text = path.read_text(encoding="ascii").strip()
    except FileNotFoundError:
        raise ChainError(
            f"no audit key at {path}: the server makes it at its first start"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ChainError(f"cannot read the audit key at {path}: {type(exc).__name__}") from None
    try:
        key = bytes.fromhex(text)
    except ValueError:
        key = b""
    if len(key) < _KEY_BYTES:
        raise ChainError(f"the audit key at {path} is not {_KEY_BYTES} bytes of hex")
    return key


def ensure_key(path: Path) -> bytes:
    """The checkpoint key in `path`, made there (owner-only, 0600) if there is none yet."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    except FileExistsError:
        return read_key(path)
    with os.fdopen(fd, "w", encoding="ascii") as f:
        f.write(secrets.token_hex(_KEY_BYTES) + "\n")
    return read_key(path)
