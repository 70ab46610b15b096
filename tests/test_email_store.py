"""`SqlMailLog`, the email channel's record of handled mails and used links, on every backend."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from pizzabot.store.mail import SqlMailLog
from pizzabot.store.migrate import upgrade
from pizzabot.store.sql import SqlStore, connect

NOW = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)


async def test_a_key_is_recorded_once_and_can_be_released(db_url: str) -> None:
    engine = connect(db_url)
    await upgrade(engine)
    store = SqlStore(engine)
    log = SqlMailLog(store)
    try:
        key = "mail:<CAGm3qFz8x+Yk2Vq0wLr@mail.gmail.com>"
        assert not await log.seen(key)
        # Two servers racing for the same mail: exactly one wins.
        results = await asyncio.gather(
            *(log.record_once(key, kind="mail", now=NOW) for _ in range(5))
        )
        assert sorted(results) == [False, False, False, False, True]
        assert await log.seen(key)

        await log.release(key)
        assert not await log.seen(key)
        assert await log.record_once(key, kind="mail", now=NOW)
        assert not await log.record_once(key, kind="link", now=NOW)
    finally:
        await store.aclose()
