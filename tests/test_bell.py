"""The decision bell: one ring wakes every waiter at once, and a ring is never missed."""

from __future__ import annotations

import asyncio

from pizzabot.agent.bell import Bell


async def test_one_ring_answers_every_waiter() -> None:
    bell, decided = Bell(), {"value": None}

    async def look() -> str | None:
        return decided["value"]

    waiters = [asyncio.create_task(bell.until(look, timeout=60)) for _ in range(50)]
    await asyncio.sleep(0)
    assert not any(w.done() for w in waiters)
    decided["value"] = "approved"
    bell.ring()
    assert await asyncio.gather(*waiters) == ["approved"] * 50


async def test_a_ring_while_looking_is_not_lost() -> None:
    bell, looks = Bell(), 0

    async def look() -> str | None:
        nonlocal looks
        looks += 1
        if looks == 1:
            bell.ring()  # the answer lands while the first look is still reading
            return None
        return "approved"

    assert await bell.until(look, timeout=60) == "approved"


async def test_the_wait_ends_with_none_when_nothing_is_decided() -> None:
    async def look() -> str | None:
        return None

    assert await Bell().until(look, timeout=0.05) is None
