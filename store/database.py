"""`Database`: the one way every store class reaches the database, on SQLite and PostgreSQL.

Every store method is one transaction, written as a plain function of a `Connection` (or of
a `Session` where the ORM earns its keep, through `orm`) and handed to `Database.run` (or
`Database.read` when it only reads), which run it in one go:
- on PostgreSQL through asyncpg (`run_sync`: no threads);
- on SQLite, on the event loop itself. A local SQLite transaction takes a fraction of a
  millisecond of CPU, and under the GIL a thread does not run it any sooner: aiosqlite's hop
  to its thread and back for every statement, fetch, BEGIN and COMMIT cost more than the SQL
  (`pizzabot bench` measured a step's store time going from ~40 ms to a few). Only when
  another process holds the database (SQLite's one writer) does the wait move to a thread
  of the database's own, so the loop is never blocked for longer than a short busy timeout.
  An asyncio lock queues this process's transactions, so they never meet each other.

The run store, the triggers, the mail log and the web sessions all share one `Database`, so
on SQLite they queue behind one lock and one connection instead of fighting over the file.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sqlite3
import stat
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from sqlalchemy import Connection, Engine, create_engine, event, text
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.orm import Session
from sqlalchemy.pool import StaticPool

from pizzabot.store.direct import compiled
from pizzabot.store.pg import RUNS_CHANNEL
from pizzabot.store.pg_socket import SOCKET_DIRS, prefer_socket
from pizzabot.store.quiet_checkpoint import WAL_AUTOCHECKPOINT_PAGES, QuietCheckpointer

T = TypeVar("T")
log = logging.getLogger(__name__)

#: How long a transaction on the event loop waits for another process's write before the wait
#: moves to the database's thread (where it may take up to `_BUSY_WAIT_MS`).
_BUSY_INLINE_MS = 50
_BUSY_WAIT_MS = 30_000

#: Page cache per SQLite connection, in KiB (SQLite's default is 2 MiB): a connection's
#: cache grows with the file up to this. A step touches a few dozen pages (the upper levels
#: of the tables and indexes, the newest rows), which fit many times over; a page that falls
#: out is read again from the operating system's cache, not the disk.
_SQLITE_CACHE_KIB = 1024

#: Prepared statements kept per PostgreSQL connection (SQLAlchemy's default is 100). Steps
#: alone run some 65 distinct statements, and the scheduler, the outbox, the channels and the
#: web pages add theirs; one evicted costs a round trip (Parse, Describe) to prepare again.
_PG_STATEMENTS = 500

_NOTIFY = text("SELECT pg_notify(:c, :id)")


def _pragmas(busy_ms: int) -> Callable[[Any, Any], None]:
    def on_connect(dbapi_conn: Any, _record: Any) -> None:
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute("PRAGMA synchronous=NORMAL")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.execute(f"PRAGMA busy_timeout={busy_ms}")
        cur.execute(f"PRAGMA cache_size=-{_SQLITE_CACHE_KIB}")
        cur.execute(f"PRAGMA wal_autocheckpoint={WAL_AUTOCHECKPOINT_PAGES}")
        cur.close()

    return on_connect


def _private_sqlite_file(url: str) -> None:
    """Make the database file (and its -wal, -shm, -journal) readable by its owner only.

    The database holds item secrets. SQLite creates a file with the process's umask (0644
    usually) but gives -wal, -shm and -journal the mode of the database file, so creating
    the database 0600 first is enough for new files; files left loose by an older start are
    tightened, and the log says so.
    """
    path = make_url(url).database
    if not path or path == ":memory:" or path.startswith("file:"):
        return
    # A missing folder is SQLite's to report, on the first connection, as before.
    with contextlib.suppress(FileExistsError, FileNotFoundError):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600))
    for name in (path, f"{path}-wal", f"{path}-shm", f"{path}-journal"):
        try:
            mode = stat.S_IMODE(os.stat(name).st_mode)
        except FileNotFoundError:
            continue
        if mode & 0o077:
            os.chmod(name, mode & 0o700)
            log.warning(
                "database file %s was open to other users (mode %03o); made it %03o",
                name,
                mode,
                mode & 0o700,
            )


def connect(
    url: str, *, echo: bool = False, socket_dirs: Sequence[str] = SOCKET_DIRS
) -> AsyncEngine:
    """An engine for `url`; SQLite gets WAL and a busy timeout so a CLI and a server can share it.
    A PostgreSQL on this machine is reached through its Unix socket when one of `socket_dirs`
    has it (`pizzabot.store.pg_socket`; `()`: as the URL says)."""
    if url.startswith("sqlite"):
        _private_sqlite_file(url)
        engine = create_async_engine(url, echo=echo, connect_args={"timeout": 30})
        event.listen(engine.sync_engine, "connect", _pragmas(_BUSY_WAIT_MS))
        return engine
    # No `pool_pre_ping`: it costs a round trip on every transaction. A connection that died
    # while pooled (a PostgreSQL restart) fails its next transaction before COMMIT; the
    # transaction runs again on a fresh connection (`_pg_transaction`).
    # Last in, first out: a quiet moment uses one or two connections, whose prepared
    # statements and server process are warm, instead of turning through all ten, each of
    # which would prepare every statement (a round trip) and load the catalog again.
    engine = create_async_engine(
        url,
        echo=echo,
        pool_size=10,
        max_overflow=10,
        pool_use_lifo=True,
        connect_args={"prepared_statement_cache_size": _PG_STATEMENTS},
    )
    prefer_socket(engine, socket_dirs)
    return engine


def _sync_sqlite(engine: AsyncEngine, busy_ms: int) -> Engine:
    """A synchronous engine on the same SQLite file as `engine`."""
    url = engine.url.set(drivername="sqlite")
    # One connection, always the same: our transactions take turns anyway, and a connection
    # keeps its page cache warm only while no other connection writes.
    sync = create_engine(
        url,
        echo=engine.echo,
        connect_args={"timeout": busy_ms / 1000},
        poolclass=StaticPool,
    )
    event.listen(sync, "connect", _pragmas(busy_ms))
    return sync


def _locked(exc: OperationalError | sqlite3.OperationalError) -> bool:
    """Whether SQLite refused for another connection's lock: through SQLAlchemy, or from
    `sqlite3` itself for a statement sent on it directly (`pizzabot.store.direct`)."""
    said = str(exc.orig if isinstance(exc, OperationalError) else exc)
    return "locked" in said or "busy" in said


# What asyncpg's protocol says when an operation starts on a connection it knows is gone or
# still busy with the server's last message (a backend ended by a restart): nothing was sent.
_UNSENT = ("cannot switch to state", "not connected")


def _unsent(error: BaseException | None) -> bool:
    """Whether asyncpg refused the call itself, before sending: its `InterfaceError`
    ("connection is closed"), or its protocol's refusal to start an operation, apart from
    the server's errors and a connection lost mid-call (`PostgresConnectionError`)."""
    from asyncpg.exceptions import InterfaceError, InternalClientError

    if isinstance(error, InternalClientError):
        return str(error).startswith(_UNSENT)
    return isinstance(error, InterfaceError)


def _refused_unsent(exc: DBAPIError) -> bool:
    """`_unsent`, for the asyncpg error SQLAlchemy wrapped."""
    return _unsent(getattr(exc.orig, "__cause__", None))


def _nothing_applied(exc: DBAPIError, *, applies_when_sent: bool) -> bool:
    """The one rule for running a unit of work again: only when none of it can have taken
    effect. Nothing sent never did; on a connection that died, what was sent took effect
    only if it applies on its own (a write in autocommit), never inside a transaction
    whose COMMIT was not sent (the server rolls it back)."""
    if _refused_unsent(exc):
        return True
    return exc.connection_invalidated and not applies_when_sent


async def _pg(
    engine: AsyncEngine,
    fn: Callable[[Connection], T],
    *,
    autocommit: bool,
    applies_when_sent: bool,
    again: bool = True,
) -> T:
    """Run `fn` on a PostgreSQL connection, as one transaction or in autocommit (no BEGIN
    and no COMMIT, each a round trip), and once more on a fresh connection when the first
    failed before any of it could apply (`_nothing_applied`). A connection lost during
    COMMIT leaves the outcome unknown: that error goes to the caller."""
    committing = False
    async with engine.connect() as conn:
        try:
            if autocommit:
                auto = await conn.execution_options(isolation_level="AUTOCOMMIT")
                return await auto.run_sync(fn)
            async with conn.begin():
                result = await conn.run_sync(fn)
                committing = True
            return result
        except DBAPIError as exc:
            if committing or not again:
                raise
            if not _nothing_applied(exc, applies_when_sent=applies_when_sent):
                raise
            log.info(
                "a pooled PostgreSQL connection was dead (%s); retrying", type(exc.orig).__name__
            )
            if not exc.connection_invalidated:
                await conn.invalidate()
    return await _pg(
        engine, fn, autocommit=autocommit, applies_when_sent=applies_when_sent, again=False
    )


def orm(fn: Callable[[Session], T]) -> Callable[[Connection], T]:
    """`fn` with an ORM session on the transaction's connection, for `Database.run`."""

    def in_session(c: Connection) -> T:
        with Session(bind=c, expire_on_commit=False) as session:
            result = fn(session)
            session.flush()  # the connection's transaction commits it
            return result

    return in_session


def _sqlite_transaction(engine: Engine, fn: Callable[[Connection], T]) -> tuple[T, bool]:
    """`fn`'s result, and whether it wrote anything (SQLite counts the rows changed)."""
    with engine.begin() as c:
        raw = c.connection.driver_connection
        assert raw is not None
        changes = raw.total_changes
        return fn(c), raw.total_changes != changes


class Database:
    """One database, and the one way to run a transaction on it (see the module docstring)."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self.is_postgres = engine.dialect.name == "postgresql"
        # SQLite allows one writer: queue our own transactions rather than fight over the lock.
        self._lock: asyncio.Lock | None = None
        self._inline: Engine | None = None
        self._waiting: Engine | None = None
        self._thread: ThreadPoolExecutor | None = None
        self._checkpointer: QuietCheckpointer | None = None
        if not self.is_postgres:
            self._lock = asyncio.Lock()
            self._inline = _sync_sqlite(engine, _BUSY_INLINE_MS)
            self._waiting = _sync_sqlite(engine, _BUSY_WAIT_MS)
            self._thread = ThreadPoolExecutor(1, thread_name_prefix="pizzabot-sqlite")
            self._checkpointer = QuietCheckpointer(self._waiting, self._lock, self._thread)

    async def run(self, fn: Callable[[Connection], T], *, one_statement: bool = False) -> T:
        """Run `fn` with a plain connection as one transaction: committed when it returns,
        rolled back if it raises. With `one_statement` (`fn` sends exactly one statement,
        and may read what it wrote through RETURNING), on PostgreSQL that statement is its
        own transaction, without BEGIN and COMMIT, each a round trip. On SQLite both are the
        same."""
        if self.is_postgres:
            return await _pg(
                self.engine, fn, autocommit=one_statement, applies_when_sent=one_statement
            )
        return await self._sqlite(fn)

    async def read(self, fn: Callable[[Connection], T]) -> T:
        """Run `fn`, which must only read (no writes, locks, NOTIFY or sequences), without a
        transaction of its own on PostgreSQL: each statement sees what was committed when it
        started, as under READ COMMITTED inside a transaction, and a read of one statement is
        one round trip instead of three. On SQLite it is `run`, which costs nothing extra."""
        if self.is_postgres:
            return await _pg(self.engine, fn, autocommit=True, applies_when_sent=False)
        return await self._sqlite(fn)

    async def direct(self, statement: Any, params: Mapping[str, Any]) -> list[Any]:
        """PostgreSQL: run one statement as `run(..., one_statement=True)` does, sent on
        asyncpg itself (`pizzabot.store.direct`), compiled once per statement; its rows.
        Sent again on a fresh connection only when asyncpg refused to send it."""
        sent = compiled(statement, self.engine.dialect)
        args = sent.args(params)
        for again in (True, False):
            async with self.engine.connect() as conn:
                driver: Any = (await conn.get_raw_connection()).driver_connection
                try:
                    rows: list[Any] = await driver.fetch(sent.sql, *args)
                    return rows
                except Exception as exc:
                    if not again or not _unsent(exc):
                        raise
                    log.info(
                        "a pooled PostgreSQL connection was dead (%s); retrying", type(exc).__name__
                    )
                    await conn.invalidate()
        raise AssertionError("unreachable: the second try returns or raises")

    def insert(self, table: Any) -> Any:
        """An INSERT that can say ON CONFLICT DO NOTHING, in the database's own dialect."""
        return pg_insert(table) if self.is_postgres else sqlite_insert(table)

    def notify_runnable(self, c: Connection, run_id: str) -> None:
        """Tell every listening worker (any process) that a run can be claimed; PostgreSQL
        delivers it when this transaction commits, and never if it rolls back."""
        if self.is_postgres:
            c.execute(_NOTIFY, {"c": RUNS_CHANNEL, "id": run_id})

    async def _sqlite(self, fn: Callable[[Connection], T]) -> T:
        assert self._lock is not None and self._inline is not None
        assert self._checkpointer is not None
        async with self._lock:
            try:
                result, wrote = _sqlite_transaction(self._inline, fn)
            except (OperationalError, sqlite3.OperationalError) as exc:
                if not _locked(exc):
                    raise
            else:
                if wrote:
                    self._checkpointer.wrote()
                return result
            # Another process is writing: wait for it off the loop, then try again.
            assert self._thread is not None and self._waiting is not None
            loop = asyncio.get_running_loop()
            result, wrote = await loop.run_in_executor(
                self._thread, _sqlite_transaction, self._waiting, fn
            )
            if wrote:
                self._checkpointer.wrote()
            return result

    async def aclose(self) -> None:
        if self._checkpointer is not None:
            await self._checkpointer.aclose()
        if self._thread is not None:
            self._thread.shutdown(wait=True)
        for sync in (self._inline, self._waiting):
            if sync is not None:
                sync.dispose()
        await self.engine.dispose()
