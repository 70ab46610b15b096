"""The store contract's backends, and the roles each of them offers the tests.

A contract test names the roles it uses as fixtures typed by their protocols (`runs:
RunStore`, `items: InboxItems`, `outbox: Outbox`, `audit: AuditLog`, `switches: Switches`,
`requests: RequestStore`, `undos: Undos`, `grants: Grants`), and runs once on every backend that implements
all of them (`BACKENDS`). A backend without one of its roles is never parametrized for that
test: nothing is skipped, the test does not exist for it.

    sqlite    every role (`pizzabot.store.SqlStore`, `pizzabot.store.grants.SqlGrants`)
    postgres  every role, in a database of its own per test
    memory    the roles of `Store` (`pizzabot.agent.testing.memory_store.MemoryStore`)

Several roles of one test are one store: what one role writes, another reads.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from pizzabot.agent.policy.grants import Grants
from pizzabot.agent.store import (
    AuditLog,
    InboxItems,
    Outbox,
    RequestStore,
    RunStore,
    Store,
    Switches,
    Undos,
)
from pizzabot.agent.testing.memory_store import MemoryStore
from pizzabot.store.grants import SqlGrants
from pizzabot.store.migrate import upgrade
from pizzabot.store.sql import SqlStore, connect
from tests.conftest import fresh_pg_database

#: The roles of `Store`, by the name of their fixture.
STORE_ROLES = frozenset({"runs", "items", "outbox", "audit", "switches", "requests", "undos"})
#: Every role the contract covers: `Store`'s, and the grants kept beside it.
ROLES = STORE_ROLES | {"grants"}

#: The roles each backend implements.
BACKENDS: dict[str, frozenset[str]] = {
    "sqlite": ROLES,
    "postgres": ROLES,
    "memory": STORE_ROLES,
}


@dataclass(frozen=True)
class Backend:
    name: str
    store: Store
    grants: Grants | None = None


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Run each contract test on the backends that have every role it asks for."""
    if "backend" not in metafunc.fixturenames:
        return
    wanted = ROLES.intersection(metafunc.fixturenames)
    metafunc.parametrize(
        "backend",
        [
            pytest.param(name, marks=[pytest.mark.postgres] if name == "postgres" else [])
            for name, roles in BACKENDS.items()
            if wanted <= roles
        ],
        indirect=True,
    )


@contextlib.asynccontextmanager
async def _sql(name: str, url: str) -> AsyncIterator[Backend]:
    engine = connect(url)
    await upgrade(engine)
    store = SqlStore(engine)
    try:
        yield Backend(name, store, SqlGrants(store.db))
    finally:
        await store.aclose()


@pytest.fixture
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    name = request.param
    if name == "memory":
        store = MemoryStore()
        yield Backend(name, store)
        await store.aclose()
    elif name == "sqlite":
        async with _sql(name, f"sqlite+aiosqlite:///{tmp_path / 'pizzabot.db'}") as sqlite:
            yield sqlite
    else:
        async with fresh_pg_database() as url, _sql(name, url) as postgres:
            yield postgres


@pytest.fixture
def runs(backend: Backend) -> RunStore:
    return backend.store


@pytest.fixture
def items(backend: Backend) -> InboxItems:
    return backend.store


@pytest.fixture
def outbox(backend: Backend) -> Outbox:
    return backend.store


@pytest.fixture
def audit(backend: Backend) -> AuditLog:
    return backend.store


@pytest.fixture
def switches(backend: Backend) -> Switches:
    return backend.store


@pytest.fixture
def requests(backend: Backend) -> RequestStore:
    return backend.store


@pytest.fixture
def undos(backend: Backend) -> Undos:
    return backend.store


@pytest.fixture
def grants(backend: Backend) -> Grants:
    assert backend.grants is not None, f"{backend.name} has no grants: BACKENDS says it has"
    return backend.grants
