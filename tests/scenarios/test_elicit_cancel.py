"""A question a tool asked lives only as long as the call that asked it.

The "ask" MCP server (official SDK, a process of its own, over stdio and over streamable
HTTP, asking the old way with `elicitation/create` and the 2026-07-28 way with "input
required") asks for a form in the middle of a call; the engine runs in the test's process
against it. Cancelling the run answers the server `cancel` at once, and the server's own log
shows it got exactly that. The question's time-out is the default hour and nothing else is
decided meanwhile, so only the cancellation can have answered it. A server whose process dies
mid-question leaves no question open either: the item closes as cancelled and the run goes on.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from pizzabot.agent.model import Item, ItemKind, ItemStatus, RunStatus
from pizzabot.agent.policy import Principal
from pizzabot.agent.testing.scripts import Reply, ToolCall, turns
from tests.peers import mcp_elicit, mcp_tools
from tests.peers.inproc import InProcess
from tests.peers.tcp_proxy import TcpProxy
from tests.waiting import eventually

SCRIPT = turns(
    Reply(text="Let me ask.", tool_calls=[ToolCall("ask__profile", {})]),
    Reply(text="done"),
)


@contextlib.asynccontextmanager
async def ask_server(transport: str, log: Path, *, legacy: bool) -> AsyncIterator[dict[str, Any]]:
    """The "ask" server as a skill's `mcp_servers` entry, over `transport`."""
    if transport == "stdio":
        yield mcp_elicit.server_entry(log, legacy=legacy)
        return
    async with mcp_elicit.serve_http(log=log, legacy=legacy) as url:
        yield {"url": url}


def skill(entry: dict[str, Any]) -> dict[str, Any]:
    return {"mcp_servers": {"ask": entry}, "tools": {"ask.profile": "auto"}}


async def question_of(h: InProcess, run_id: str) -> Item:
    """The question the run's tool asked, once it is there (the call waiting on it)."""

    async def pending() -> Item | None:
        items = await h.store.list_items(run_id=run_id, status=ItemStatus.PENDING)
        return next((i for i in items if i.kind is ItemKind.QUESTION), None)

    return await eventually(pending, what="the tool's question to be asked")


async def heard(log: Path) -> list[dict[str, Any]]:
    """What the "ask" server's `profile` got back, once it got something."""

    async def lines() -> list[dict[str, Any]] | None:
        got = [x for x in mcp_tools.read_log(log) if x.get("tool") == "profile"]
        return got or None

    return await eventually(lines, what="the ask server to hear an answer")


@pytest.mark.parametrize("legacy", [True, False], ids=["elicitation-create", "input-required"])
@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_cancelling_the_run_answers_the_waiting_question_cancel(
    tmp_path: Path, transport: str, legacy: bool
) -> None:
    log = tmp_path / "ask.jsonl"
    async with (
        ask_server(transport, log, legacy=legacy) as entry,
        InProcess(tmp_path, SCRIPT, skill=skill(entry)) as h,
    ):
        run = await h.runs.start("test", "profile please", by=Principal.owner("api"))
        item = await question_of(h, run.id)
        assert mcp_tools.read_log(log) == []  # the server waits on its question

        cancelled = await h.runs.cancel(run.id, by=Principal.owner("api"))

        assert cancelled.status is RunStatus.CANCELLED
        assert await heard(log) == [
            {"tool": "profile", "action": "cancel", "content": None, "types": None}
        ]
        closed = await h.store.get_item(item.id)
        assert closed.status is ItemStatus.CANCELLED
        assert closed.decided_by == "engine"


def ask_server_processes() -> list[psutil.Process]:
    me = psutil.Process()
    return [
        p
        for p in me.children(recursive=True)
        if any("mcp_elicit.py" in part for part in p.cmdline())
    ]


async def test_a_server_that_dies_mid_question_leaves_no_question_open(tmp_path: Path) -> None:
    log = tmp_path / "ask.jsonl"
    entry = mcp_elicit.server_entry(log, legacy=True)
    async with InProcess(tmp_path, SCRIPT, skill=skill(entry)) as h:
        run = await h.runs.start("test", "profile please", by=Principal.owner("api"))
        item = await question_of(h, run.id)
        for proc in ask_server_processes():
            proc.kill()

        done = await h.wait(run.id, {"done"})

        assert done.status is RunStatus.DONE  # the model read the failed call and answered
        assert (await h.store.get_item(item.id)).status is ItemStatus.CANCELLED


async def test_a_question_nobody_answers_in_time_is_answered_cancel(tmp_path: Path) -> None:
    log = tmp_path / "ask.jsonl"
    entry = mcp_elicit.server_entry(log, legacy=True)
    quick = {
        "mcp_servers": {"ask": entry},
        "tools": {"ask.profile": {"policy": "auto", "timeout": "1s"}},
    }
    async with InProcess(tmp_path, SCRIPT, skill=quick) as h:
        run = await h.runs.start("test", "profile please", by=Principal.owner("api"))
        item = await question_of(h, run.id)

        done = await h.wait(run.id, {"done"})

        assert done.status is RunStatus.DONE
        assert (await h.store.get_item(item.id)).status is ItemStatus.EXPIRED
    assert await heard(log) == [
        {"tool": "profile", "action": "cancel", "content": None, "types": None}
    ]


async def test_an_http_server_that_goes_away_mid_question_leaves_no_question_open(
    tmp_path: Path,
) -> None:
    log = tmp_path / "ask.jsonl"
    async with contextlib.AsyncExitStack() as stack:
        url = await stack.enter_async_context(mcp_elicit.serve_http(log=log, legacy=True))
        h = await stack.enter_async_context(InProcess(tmp_path, SCRIPT, skill=skill({"url": url})))
        run = await h.runs.start("test", "profile please", by=Principal.owner("api"))
        item = await question_of(h, run.id)
        for proc in ask_server_processes():
            proc.kill()

        # The call fails, and the server cannot be reached again: the run ends failed.
        ended = await h.wait(run.id, {"failed"})

        assert ended.error is not None and "could not be reached" in ended.error
        assert (await h.store.get_item(item.id)).status is ItemStatus.CANCELLED


async def test_a_dropped_http_connection_answers_the_live_server_cancel(tmp_path: Path) -> None:
    log = tmp_path / "ask.jsonl"
    async with contextlib.AsyncExitStack() as stack:
        url = await stack.enter_async_context(mcp_elicit.serve_http(log=log, legacy=True))
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        proxy = await stack.enter_async_context(TcpProxy(port))
        through = url.replace(f":{port}/", f":{proxy.port}/")
        h = await stack.enter_async_context(
            InProcess(tmp_path, SCRIPT, skill=skill({"url": through}))
        )
        run = await h.runs.start("test", "profile please", by=Principal.owner("api"))
        item = await question_of(h, run.id)

        assert proxy.drop() > 0  # the call's stream is cut; the server lives on

        assert await heard(log) == [
            {"tool": "profile", "action": "cancel", "content": None, "types": None}
        ]
        assert (await h.store.get_item(item.id)).status is ItemStatus.CANCELLED
        done = await h.wait(run.id, {"done"})
        assert done.status is RunStatus.DONE  # the model read the failed call and answered
