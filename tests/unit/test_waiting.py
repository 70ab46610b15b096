"""The test harness's own promises: `eventually` returns what it waited for or fails saying what
that was, and a peer the suite needs fails the test when it is missing instead of skipping."""

from __future__ import annotations

import asyncio
import tomllib
from pathlib import Path

import pytest

from tests.peers import required
from tests.waiting import eventually, eventually_sync


async def test_eventually_returns_the_first_truthy_answer_of_an_async_check() -> None:
    answers: list[dict[str, str]] = [{}, {}, {"status": "done"}]

    async def check() -> dict[str, str]:
        return answers.pop(0)

    assert await eventually(check, what="the run", interval=0) == {"status": "done"}


async def test_eventually_takes_a_sync_check_and_goes_on_once_it_holds() -> None:
    ready = asyncio.Event()
    asyncio.get_running_loop().call_soon(ready.set)
    assert await eventually(ready.is_set, what="the flag") is True


async def test_a_timed_out_wait_says_what_it_awaited_and_what_it_last_saw() -> None:
    with pytest.raises(AssertionError) as failed:
        await eventually(
            lambda: "",
            what="run r1 to finish",
            timeout=0.05,
            interval=0.01,
            context=lambda: "--- server log ---",
        )
    assert str(failed.value) == (
        "waited 0.05 s for run r1 to finish; last seen: ''\n--- server log ---"
    )


async def test_an_expected_error_counts_as_not_yet_and_any_other_fails_at_once() -> None:
    tries: list[int] = []

    def refused_then_up() -> str:
        tries.append(1)
        if len(tries) < 3:
            raise ConnectionRefusedError("not listening yet")
        return "up"

    up = await eventually(refused_then_up, what="the server", retry_on=(OSError,), interval=0)
    assert up == "up"

    def broken() -> str:
        raise KeyError("status")

    with pytest.raises(KeyError):
        await eventually(broken, what="the server", retry_on=(OSError,))


def test_the_blocking_twin_waits_the_same_way_and_fails_the_same_way() -> None:
    answers: list[str | Exception] = [ConnectionRefusedError("not yet"), "", "up"]

    def starting() -> str:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    assert eventually_sync(starting, what="dovecot", retry_on=(OSError,), interval=0) == "up"
    with pytest.raises(AssertionError) as failed:
        eventually_sync(lambda: None, what="dovecot to greet", timeout=0.05, interval=0.01)
    assert str(failed.value) == "waited 0.05 s for dovecot to greet; last seen: None"


def test_a_missing_peer_fails_the_test_naming_it_and_the_install_script(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    gone = required.Peer("dovecot (/nowhere/dovecot)", lambda: False)
    monkeypatch.setitem(required.PEERS, "mail", gone)
    with pytest.raises(pytest.fail.Exception) as failed:
        required.require("mail")
    assert "dovecot (/nowhere/dovecot) is missing" in str(failed.value)
    assert ".ci/install-system-packages" in str(failed.value)


def test_every_peer_marker_is_declared_and_has_a_check() -> None:
    config = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())
    declared = {m.split(":")[0] for m in config["tool"]["pytest"]["ini_options"]["markers"]}
    assert set(required.PEERS) <= declared
