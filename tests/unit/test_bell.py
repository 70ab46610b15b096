"""The decision bell: a ring wakes the waiters on its run at once and no one else, a ring for
all wakes everyone, and a ring is never missed."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

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


async def test_a_ring_for_one_run_wakes_only_its_waiters() -> None:
    bell, looks, decided = Bell(), {"a": 0, "b": 0}, {"a": None, "b": None}

    def looker(run: str) -> Callable[[], Awaitable[str | None]]:
        async def look() -> str | None:
            looks[run] += 1
            return decided[run]

        return look

    a = [asyncio.create_task(bell.until(looker("a"), 60, run_id="a")) for _ in range(3)]
    b = [asyncio.create_task(bell.until(looker("b"), 60, run_id="b")) for _ in range(1000)]
    await asyncio.sleep(0)
    assert looks == {"a": 3, "b": 1000}
    decided["a"] = "approved"
    bell.ring("a")
    assert await asyncio.gather(*a) == ["approved"] * 3
    # b's thousand waiters did not look again for a's decision.
    assert looks == {"a": 6, "b": 1000}
    # A ring for every run (the kill switch) wakes them all.
    decided["b"] = "halted"
    bell.ring()
    assert await asyncio.gather(*b) == ["halted"] * 1000
    assert bell._runs == {} and bell._waiting == {}


async def test_a_waiter_that_gives_up_leaves_nothing_behind() -> None:
    async def look() -> str | None:
        return None

    bell = Bell()
    assert await bell.until(look, timeout=0.01, run_id="r") is None
    assert bell._runs == {} and bell._waiting == {}
