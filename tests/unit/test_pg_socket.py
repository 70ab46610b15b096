"""A PostgreSQL on this machine is reached through its Unix socket when the socket lets us in
and leads to the URL's server; otherwise over TCP, as the URL says. Which one a connection
took shows in `inet_server_addr()`: NULL over a Unix socket."""

from __future__ import annotations

import logging
import socket
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine

from pizzabot.store.pg_socket import SOCKET_DIRS, _SocketFirst, socket_dir
from pizzabot.store.sql import connect

pytestmark = pytest.mark.postgres


async def _server_addr(engine: AsyncEngine) -> str | None:
    async with engine.connect() as c:
        addr = (await c.execute(text("SELECT inet_server_addr()::text"))).scalar()
    return None if addr is None else str(addr)


async def _socket_lets_us_in(url: str, folder: str) -> bool:
    import asyncpg

    u = make_url(url)
    try:
        conn = await asyncpg.connect(
            host=folder,
            port=u.port or 5432,
            user=u.username,
            password=u.password,
            database=u.database,
        )
    except (OSError, asyncpg.exceptions.InvalidAuthorizationSpecificationError):
        return False
    await conn.close()
    return True


def _said(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "pizzabot.store.pg_socket"]


async def test_the_local_server_is_reached_through_its_socket_when_it_lets_us_in(
    pg_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    folder = socket_dir(make_url(pg_url))
    assert folder is not None, f"no PostgreSQL socket for {make_url(pg_url)!r} in {SOCKET_DIRS}"
    caplog.set_level(logging.INFO, "pizzabot.store.pg_socket")
    engine = connect(pg_url)
    try:
        through_socket = await _socket_lets_us_in(pg_url, folder)
        for _ in range(3):  # each a connection of its own, the first one deciding
            async with engine.connect() as a, engine.connect() as b:
                for c in (a, b):
                    addr = (await c.execute(text("SELECT inet_server_addr()::text"))).scalar()
                    assert (addr is None) is through_socket
            await engine.dispose()
    finally:
        await engine.dispose()
    [said] = _said(caplog)  # once, whatever the number of connections
    assert ("Unix socket in" in said) is through_socket
    assert make_url(pg_url).password is None or make_url(pg_url).password not in said


async def test_a_socket_that_refuses_leaves_the_engine_on_tcp(
    pg_url: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # A socket file nobody listens on: connecting to it is refused.
    port = make_url(pg_url).port or 5432
    dead = socket.socket(socket.AF_UNIX)
    dead.bind(str(tmp_path / f".s.PGSQL.{port}"))
    dead.close()
    caplog.set_level(logging.INFO, "pizzabot.store.pg_socket")
    engine = connect(pg_url, socket_dirs=[str(tmp_path)])
    try:
        assert await _server_addr(engine) is not None
        await engine.dispose()
        assert await _server_addr(engine) is not None
    finally:
        await engine.dispose()
    [said] = _said(caplog)
    assert "over TCP" in said and "ConnectionRefusedError" in said


async def test_a_url_naming_its_own_host_is_taken_as_it_is(pg_url: str) -> None:
    url = make_url(pg_url)
    tcp = url.update_query_dict({"host": url.host or "127.0.0.1"})
    assert socket_dir(tcp) is None
    engine = connect(tcp.render_as_string(hide_password=False))
    try:
        assert await _server_addr(engine) is not None
    finally:
        await engine.dispose()


class _Conn:
    def __init__(self, started: datetime) -> None:
        self.started = started
        self.closed = False

    def cursor(self) -> Any:
        conn = self

        class Cursor:
            def execute(self, _sql: str) -> None: ...

            def fetchone(self) -> tuple[datetime]:
                return (conn.started,)

            def close(self) -> None: ...

        return Cursor()

    def close(self) -> None:
        self.closed = True


class _TwoServers:
    """A dialect whose socket leads to one server and whose TCP address to another."""

    def __init__(self) -> None:
        self.made: list[tuple[str, _Conn]] = []

    def connect(self, **params: Any) -> _Conn:
        started = datetime(2026, 1, 1 if params["host"].startswith("/") else 2, tzinfo=UTC)
        conn = _Conn(started)
        self.made.append((params["host"], conn))
        return conn


def test_a_socket_leading_to_another_server_is_not_used() -> None:
    hook = _SocketFirst("/run/other", "127.0.0.1:5432")
    dialect = _TwoServers()
    params = {"host": "127.0.0.1", "port": 5432}
    first = hook(dialect, None, [], dict(params))
    # The socket's connection was closed; the one returned is the URL's own, over TCP.
    [(via_socket, wrong), (via_tcp, right)] = dialect.made
    assert (via_socket, wrong.closed) == ("/run/other", True)
    assert (first, via_tcp, right.closed) == (right, "127.0.0.1", False)
    # From then on SQLAlchemy connects as the URL says, without trying the socket.
    assert hook(dialect, None, [], dict(params)) is None
    assert len(dialect.made) == 2
