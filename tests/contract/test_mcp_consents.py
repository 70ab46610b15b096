"""The MCP OAuth consents' contract, on SQLite and PostgreSQL: a consent opened by one
process is answered by another on the same database (where the callback landed), once; the
answer is taken once, by the holder; an unknown, used or expired state is refused; and every
callback is audited, the refused ones without a byte of the request."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from pizzabot.agent.mcp_consents import Pending, Returned, state_key
from pizzabot.store.mcp_consents import SqlConsents
from pizzabot.store.migrate import upgrade
from pizzabot.store.sql import SqlStore, connect
from tests.conftest import fresh_pg_database

T0 = datetime(2026, 12, 3, 9, 0, tzinfo=UTC)
HOUR = timedelta(hours=1)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    if request.param == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path / 'pizzabot.db'}"
    else:
        async with fresh_pg_database() as url:
            yield url


async def test_a_consent_is_answered_on_one_process_and_taken_on_another_once(
    database_url: str,
) -> None:
    holder_store = SqlStore(connect(database_url))
    await upgrade(holder_store.engine)
    callback_store = SqlStore(connect(database_url))  # the server the browser came back to
    try:
        holder, callback = SqlConsents(holder_store.db), SqlConsents(callback_store.db)
        key = state_key("state-1")
        await holder.open(key, Pending("sales", "crm", "run1"), now=T0, expires_at=T0 + HOUR)
        assert await holder.take(key) is None  # nothing came back yet

        code = Returned(code="the-code", iss="https://crm.example")
        later = T0 + timedelta(minutes=2)
        assert await callback.answer(key, code, now=later) == Pending("sales", "crm", "run1")
        # The same state again (a replayed link, or a second tab): refused.
        assert await callback.answer(key, Returned(code="other"), now=later) is None
        assert await holder.answer(state_key("forged"), code, now=later) is None

        assert await holder.take(key) == code
        assert await holder.take(key) is None  # single use
        assert await callback.answer(key, code, now=later) is None  # forgotten once taken

        # A refusal is an answer too; an expired consent takes none.
        refused = state_key("state-2")
        await holder.open(refused, Pending("sales", "crm"), now=T0, expires_at=T0 + HOUR)
        assert await callback.answer(refused, Returned(error="access_denied"), now=later)
        assert await holder.take(refused) == Returned(error="access_denied")
        late = state_key("state-3")
        await holder.open(late, Pending("sales", "crm"), now=T0, expires_at=T0 + HOUR)
        assert await callback.answer(late, code, now=T0 + 2 * HOUR) is None
        # A consent given up is dropped: its callback is refused from then on.
        dropped = state_key("state-4")
        await holder.open(dropped, Pending("sales", "crm"), now=later, expires_at=later + HOUR)
        await holder.drop(dropped)
        assert await callback.answer(dropped, code, now=later) is None
    finally:
        await callback_store.aclose()
    try:
        trail = [(e.action, e.run_id, e.detail) for e in await holder_store.audit_log()]
    finally:
        await holder_store.aclose()
    answered = [t for t in trail if t[0] == "mcp_auth_consent_answered"]
    assert [(run, d["outcome"]) for _, run, d in answered] == [
        (None, "refused: access_denied"),
        ("run1", "code"),
    ]
    refusals = [d for action, _, d in trail if action == "mcp_auth_callback_refused"]
    assert len(refusals) == 5
    assert all("forged" not in str(d) and "the-code" not in str(d) for d in refusals)
