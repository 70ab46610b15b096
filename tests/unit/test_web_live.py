"""`Changes`, what the web page's held asks wait on: the caps per session and in all, the
longest wait, and a ring that wakes every held ask to look again."""

from __future__ import annotations

import asyncio

from pizzabot.channels.web.live import Changes, _seconds, fingerprint


def test_a_session_holds_at_most_its_share_and_the_process_at_most_its_total() -> None:
    changes = Changes(per_session=2, total=3)
    assert changes.take("a") and changes.take("a")
    assert not changes.take("a")  # a's third
    assert changes.take("b")
    assert not changes.take("c")  # the process's fourth
    assert changes.held == 3
    changes.give_back("a")
    assert changes.take("c") and not changes.take("a")
    for sid in ("a", "b", "c"):
        changes.give_back(sid)
    changes.give_back("a")
    assert changes.held == 0 and changes.take("a")


async def test_a_ring_makes_each_held_ask_look_again_until_it_finds_something() -> None:
    changes = Changes()
    inbox: list[str] = []
    looked = asyncio.Event()

    async def look() -> str | None:
        looked.set()
        return inbox[-1] if inbox else None

    waiting = asyncio.create_task(changes.until(look, 30))
    await looked.wait()
    looked.clear()
    changes.ring()  # nothing new yet: it looks, and waits on
    await looked.wait()
    assert not waiting.done()
    inbox.append("a card")
    changes.ring()
    assert await waiting == "a card"


async def test_no_ask_is_held_longer_than_the_longest_wait() -> None:
    changes = Changes(max_wait=0.01)

    async def nothing() -> str | None:
        return None

    assert await changes.until(nothing, 10_000) is None


def test_a_wait_that_is_no_number_of_seconds_holds_nothing() -> None:
    for value in (None, "", "soon", "-3", "nan", "inf", "0"):
        assert _seconds(value) == 0.0
    assert _seconds("25") == 25.0


def test_equal_fragments_have_equal_fingerprints() -> None:
    assert fingerprint("<div>1</div>") == fingerprint("<div>1</div>")
    assert fingerprint("<div>1</div>") != fingerprint("<div>2</div>")
    assert len(fingerprint("")) == 16


async def test_closing_answers_every_held_ask_and_holds_no_more() -> None:
    changes = Changes()
    looked = asyncio.Event()

    async def nothing() -> str | None:
        looked.set()
        return None

    assert changes.take("a")
    waiting = asyncio.create_task(changes.until(nothing, 30))
    await looked.wait()
    changes.close()
    assert await waiting is None
    assert not changes.take("b")
