"""Shared test setup. No test reaches the internet: any connection to a non-loopback address
from the test process fails loudly, so a test that would call a real provider cannot pass.
A test marked with a peer's name (`mail`, `postgres`, `browser`) fails when that peer is
missing (see tests/peers/required.py): never a silent skip."""

from __future__ import annotations

import contextlib
import ipaddress
import os
import socket
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import make_url

from tests.peers.required import PEERS, require

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
for _key in [k for k in os.environ if k.endswith("_API_KEY")]:
    del os.environ[_key]

PG_URL = os.environ.get("PIZZABOT_TEST_PG", "postgresql+asyncpg://postgres@127.0.0.1:5432/test")


def pg_url_for(database: str, *, driver: str = "postgresql+asyncpg") -> str:
    """`PIZZABOT_TEST_PG`'s server and credentials, for `database` (`driver` "postgresql":
    the plain form asyncpg itself takes)."""
    url = make_url(PG_URL).set(drivername=driver, database=database)
    return url.render_as_string(hide_password=False)


OUTPUT = Path(__file__).resolve().parent.parent / "test-output"


class RealNetworkRequest(RuntimeError):
    pass


_real_connect = socket.socket.connect
_real_connect_ex = socket.socket.connect_ex


def _check(address: Any) -> None:
    if isinstance(address, tuple) and address:
        host = address[0]
        try:
            ip = ipaddress.ip_address(host)
        except ValueError:
            if host not in {"localhost"}:
                raise RealNetworkRequest(
                    f"tests must not reach the network (tried {host})"
                ) from None
            return
        if not ip.is_loopback:
            raise RealNetworkRequest(f"tests must not reach the network (tried {host})")


def _guarded_connect(self: socket.socket, address: Any) -> None:
    _check(address)
    _real_connect(self, address)


def _guarded_connect_ex(self: socket.socket, address: Any) -> int:
    _check(address)
    return _real_connect_ex(self, address)


socket.socket.connect = _guarded_connect  # type: ignore[method-assign,assignment]
socket.socket.connect_ex = _guarded_connect_ex  # type: ignore[method-assign,assignment]


@pytest.fixture(scope="session")
def output_dir() -> Path:
    OUTPUT.mkdir(exist_ok=True)
    return OUTPUT


def pytest_runtest_setup(item: pytest.Item) -> None:
    for marker in PEERS:
        if item.get_closest_marker(marker) is not None:
            require(marker)


@contextlib.asynccontextmanager
async def fresh_pg_database() -> AsyncIterator[str]:
    """A new PostgreSQL database, dropped afterwards: tests never share state."""
    require("postgres")
    import asyncpg

    name = f"pizzabot_test_{uuid.uuid4().hex[:10]}"
    admin = await asyncpg.connect(pg_url_for("postgres", driver="postgresql"))
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
    finally:
        await admin.close()
    try:
        yield pg_url_for(name)
    finally:
        admin = await asyncpg.connect(pg_url_for("postgres", driver="postgresql"))
        try:
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            await admin.close()


@pytest.fixture
async def pg_url() -> AsyncIterator[str]:
    async with fresh_pg_database() as url:
        yield url


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite+aiosqlite:///{tmp_path / 'pizzabot.db'}"


@pytest.fixture(params=["sqlite", "postgres"])
async def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    """Run a test once on SQLite and once on PostgreSQL (the SQL store's own tests; the
    store contract, over every backend, is `tests/contract/`)."""
    if request.param == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path / 'pizzabot.db'}"
    else:
        async with fresh_pg_database() as url:
            yield url
