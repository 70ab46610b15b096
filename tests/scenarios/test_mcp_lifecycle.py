"""The hub keeps a server only while a loaded skill uses it: a skill whose server's
configuration changed gets a new process and the old one ends; a server whose skill is gone
ends once its last call in flight has ended, not in the middle of it; an HTTP server is told
the session is over; a starting server loads the SDK off the loop. The servers are the real
test servers, over stdio (children of the test's own process) and over HTTP."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import psutil
import pytest

from pizzabot.agent import warmup
from pizzabot.agent.questions import Answer, Question
from pizzabot.agent.skills import Skill
from pizzabot.agent.tools_mcp import ToolHub
from tests.peers import mcp_elicit
from tests.peers.mcp_http import read_requests
from tests.waiting import eventually


def skill(entry: dict[str, Any], *, name: str = "asker") -> Skill:
    return Skill.model_validate(
        {
            "name": name,
            "instructions": "Ask.",
            "model": "openai/none",
            "mcp_servers": {"ask": entry},
            "tools": {"ask.profile": "auto"},
        }
    )


def servers(log: Path) -> list[psutil.Process]:
    """The "ask" servers started for `log`, among this process's children."""
    found = []
    for proc in psutil.Process().children(recursive=True):
        try:
            if any(str(log) in part for part in proc.environ().values()):
                found.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return [p for p in found if any("mcp_elicit.py" in a for a in p.cmdline())]


async def ended(proc: psutil.Process, what: str) -> None:
    async def gone() -> bool:
        return not proc.is_running() or proc.status() == psutil.STATUS_ZOMBIE

    await eventually(gone, what=what)


async def test_a_changed_server_configuration_replaces_the_process(tmp_path: Path) -> None:
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    hub = ToolHub(env={})
    try:
        await hub.warm(skill(mcp_elicit.server_entry(first)))
        [old] = servers(first)
        assert hub.running() == {"asker": ["ask"]}

        changed = skill(mcp_elicit.server_entry(second))
        assert await hub.retain([changed]) == ["ask"]
        await ended(old, "the old version's server to end")
        assert hub.running() == {}
        await hub.warm(changed)
        assert len(servers(second)) == 1 and hub.running() == {"asker": ["ask"]}
    finally:
        await hub.aclose()


async def test_a_removed_skills_server_ends_after_its_call_in_flight(tmp_path: Path) -> None:
    log = tmp_path / "ask.jsonl"
    hub = ToolHub(env={})
    asked, answer = asyncio.Event(), asyncio.Event()

    async def person(question: Question) -> Answer:
        asked.set()
        await answer.wait()
        return Answer("decline")

    try:
        gone = skill(mcp_elicit.server_entry(log, legacy=True))
        call = asyncio.create_task(hub.call(gone, "ask", "profile", {}, ask=person))
        await asked.wait()
        [proc] = servers(log)

        assert await hub.retain([]) == ["ask"]
        assert proc.is_running() and hub.running() == {}  # the call goes on

        answer.set()
        outcome = await call
        assert '"action": "decline"' in outcome.text and not outcome.is_error
        await ended(proc, "the removed skill's server to end after its call")
    finally:
        await hub.aclose()


async def test_a_removed_skills_http_session_is_closed(tmp_path: Path) -> None:
    requests = tmp_path / "requests.jsonl"
    async with mcp_elicit.serve_http(
        log=tmp_path / "ask.jsonl", legacy=True, requests=requests
    ) as url:
        hub = ToolHub(env={})
        try:
            await hub.warm(skill({"url": url}))
            assert hub.running() == {"asker": ["ask"]}
            assert "DELETE" not in [r["method"] for r in read_requests(requests)]

            assert await hub.retain([]) == ["ask"]
            # The session's end is said to the server (the handshake era keeps sessions).
            assert {"method": "DELETE", "session": True} in read_requests(requests)
            assert hub.running() == {}
        finally:
            await hub.aclose()


async def test_the_loop_answers_while_a_starting_server_loads_the_mcp_sdk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The SDK's first import takes half a second of a core: a starting server goes on
    # answering meanwhile. Here the import waits for the loop itself, so it finishes only if
    # it is not on the loop; and a server without MCP servers does not import it at all.
    loop_ran = threading.Event()
    imported: list[str] = []

    def slow_import() -> None:
        if not loop_ran.wait(10):
            raise AssertionError("the MCP SDK was imported on the event loop")
        imported.append("mcp")

    monkeypatch.setattr(warmup, "import_client", slow_import)
    hub = ToolHub(env={})
    plain = Skill.model_validate({"name": "plain", "instructions": "Answer.", "model": "m/x"})
    await warmup.load_libraries([plain], tools=hub)
    assert imported == []
    loading = asyncio.create_task(
        warmup.load_libraries(
            [plain, skill(mcp_elicit.server_entry(tmp_path / "l.jsonl"))], tools=hub
        )
    )
    await asyncio.sleep(0.05)
    assert not loading.done()  # still loading, and the loop ran this meanwhile
    loop_ran.set()
    await asyncio.wait_for(loading, 30)
    assert imported == ["mcp"]
