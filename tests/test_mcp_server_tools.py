"""The MCP server's tools, through the official client in-process, over a desk that
records what it was handed: waiting with progress, the decision as structured output and
text, keys derived from the content, and refusals as tool errors. The transports and the
real inbox are tested end to end in tests/test_mcp_server_e2e.py."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

from mcp.client import Client
from mcp_types import CallToolResult, TextContent

from pizzabot.client.mcp.desk import DeskError
from pizzabot.client.mcp.tools import Asking, build_server
from pizzabot.client.wire import RequestBody, RequestState

NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


def _pending(n: int, kind: str = "approval") -> RequestState:
    return RequestState(
        id=f"r{n}",
        item_id=f"i{n}",
        kind="approval" if kind == "approval" else "question",
        status="pending",
        args=None,
        reason=None,
        decided_by=None,
        via=None,
        decided_at=None,
        url=f"http://127.0.0.1:8787/items/i{n}",
    )


class ScriptedDesk:
    """Files each new key as a new pending request; `decide` settles one, waking its waits."""

    def __init__(self) -> None:
        self.by_key: dict[str, RequestState] = {}
        self.asks: list[tuple[RequestBody, str]] = []
        self.changed = asyncio.Event()
        self.refuse: str | None = None

    async def submit(self, ask: RequestBody, *, key: str) -> RequestState:
        if self.refuse is not None:
            raise DeskError(self.refuse)
        self.asks.append((ask, key))
        if key not in self.by_key:
            made = _pending(len(self.by_key) + 1, "question" if ask.question else "approval")
            self.by_key[key] = made
            return made.model_copy(update={"created": True})
        return self.by_key[key]

    async def wait(self, request_id: str, seconds: float) -> RequestState:
        answer = self._find(request_id)
        if answer.pending:
            self.changed.clear()
            try:
                async with asyncio.timeout(seconds):
                    await self.changed.wait()
            except TimeoutError:
                pass
        return self._find(request_id)

    def decide(self, request_id: str, **change: Any) -> None:
        for key, answer in self.by_key.items():
            if answer.id == request_id:
                self.by_key[key] = answer.model_copy(update=change)
        self.changed.set()

    def _find(self, request_id: str) -> RequestState:
        return next(a for a in self.by_key.values() if a.id == request_id)


def _text(result: CallToolResult) -> str:
    return "".join(p.text for p in result.content if isinstance(p, TextContent))


async def _until_asked(desk: ScriptedDesk, count: int) -> None:
    async with asyncio.timeout(30):
        while len(desk.asks) < count:
            await asyncio.sleep(0.01)


async def test_approval_waits_with_progress_until_a_person_edits_it() -> None:
    desk = ScriptedDesk()
    server = build_server(Asking(desk_for=lambda _: desk, skill="inbox", heartbeat=0.05))
    beats: list[str | None] = []
    several = asyncio.Event()

    async def progress(done: float, total: float | None, message: str | None) -> None:
        beats.append(message)
        if len(beats) >= 3:
            several.set()

    async with Client(server) as client:
        call = asyncio.create_task(
            client.call_tool(
                "request_approval",
                {"title": "Drop the table", "tool": "sql", "args": {"q": "DROP TABLE t"}},
                progress_callback=progress,
            )
        )
        async with asyncio.timeout(30):
            await several.wait()
        assert not call.done()
        desk.decide(
            "r1",
            status="edited",
            args={"q": "DROP TABLE t_old"},
            decided_by="alice",
            via="slack",
            decided_at=NOW,
        )
        result = await asyncio.wait_for(call, 30)

    ask, key = desk.asks[0]
    assert (ask.skill, ask.tool, ask.args) == ("inbox", "sql", {"q": "DROP TABLE t"})
    assert key.startswith("mcp-")
    assert beats[0] == "waiting for a person: http://127.0.0.1:8787/items/i1"
    assert not result.is_error
    assert result.structured_content is not None
    assert result.structured_content["approved"] is True
    assert result.structured_content["status"] == "edited"
    assert result.structured_content["args"] == {"q": "DROP TABLE t_old"}
    assert result.structured_content["decided_by"] == "alice"
    assert "DROP TABLE t_old" in _text(result) and "alice" in _text(result)


async def test_rejection_and_expiry_say_not_to_run_the_call() -> None:
    desk = ScriptedDesk()
    server = build_server(Asking(desk_for=lambda _: desk, skill="inbox", heartbeat=0.05))
    async with Client(server) as client:
        first = asyncio.create_task(
            client.call_tool("request_approval", {"title": "a", "tool": "t", "args": {}})
        )
        await _until_asked(desk, 1)
        desk.decide("r1", status="rejected", reason="not on Fridays", decided_by="bob")
        rejected = await asyncio.wait_for(first, 30)
        second = asyncio.create_task(
            client.call_tool("request_approval", {"title": "b", "tool": "t", "args": {}})
        )
        await _until_asked(desk, 2)
        desk.decide("r2", status="expired")
        expired = await asyncio.wait_for(second, 30)

    assert rejected.structured_content is not None
    assert rejected.structured_content["approved"] is False
    assert rejected.structured_content["reason"] == "not on Fridays"
    assert "not on Fridays" in _text(rejected) and "Do not run" in _text(rejected)
    assert expired.structured_content is not None
    assert expired.structured_content["status"] == "expired"
    assert "Do not run" in _text(expired)


async def test_same_content_joins_its_request_only_while_it_is_pending() -> None:
    desk = ScriptedDesk()
    server = build_server(Asking(desk_for=lambda _: desk, skill="inbox", heartbeat=0.05))
    call = {"title": "Deploy", "tool": "deploy", "args": {"env": "prod"}}
    async with Client(server) as client:
        dropped = asyncio.create_task(client.call_tool("request_approval", call))
        await _until_asked(desk, 1)
        dropped.cancel()  # the client went away; the request stays pending
        again = asyncio.create_task(client.call_tool("request_approval", call))
        await _until_asked(desk, 2)
        desk.decide("r1", status="approved", args={"env": "prod"}, decided_at=NOW)
        found = await asyncio.wait_for(again, 30)
        # Decided: the same call a moment later is a new request, not that approval.
        later = asyncio.create_task(client.call_tool("request_approval", call))
        await _until_asked(desk, 4)
        keyed = asyncio.create_task(
            client.call_tool("request_approval", {**call, "idempotency_key": "deploy-42"})
        )
        await _until_asked(desk, 5)
        later.cancel()
        keyed.cancel()

    keys = [key for _, key in desk.asks]
    assert keys[0] == keys[1]  # the pending item joined
    assert found.structured_content is not None
    assert found.structured_content["request_id"] == "r1"
    assert keys[2] == keys[0] and keys[3] != keys[0]  # its decision is passed over: asked anew
    assert desk.by_key[keys[3]].pending
    assert keys[4] == "deploy-42"


async def test_ask_human_maps_answers_to_accept_decline_and_cancel() -> None:
    desk = ScriptedDesk()
    server = build_server(Asking(desk_for=lambda _: desk, skill="inbox", heartbeat=0.05))
    outcomes: list[CallToolResult] = []
    async with Client(server) as client:
        for n, change in enumerate(
            [
                {"status": "answered", "args": {"answer": "Tuesday"}, "decided_by": "carol"},
                {"status": "declined", "reason": "ask Dave"},
                {"status": "expired"},
            ],
            start=1,
        ):
            call = asyncio.create_task(
                client.call_tool("ask_human", {"question": f"Which day? ({n})"})
            )
            await _until_asked(desk, n)
            desk.decide(f"r{n}", **change)
            outcomes.append(await asyncio.wait_for(call, 30))

    ask, _ = desk.asks[0]
    assert ask.tool is None and ask.question == "Which day? (1)" and ask.title == "Which day? (1)"
    got = [(r.structured_content or {}).get("action") for r in outcomes]
    assert got == ["accept", "decline", "cancel"]
    assert (outcomes[0].structured_content or {})["content"] == {"answer": "Tuesday"}
    assert "Tuesday" in _text(outcomes[0]) and "ask Dave" in _text(outcomes[1])


async def test_refusals_and_oversized_input_are_tool_errors() -> None:
    desk = ScriptedDesk()
    server = build_server(Asking(desk_for=lambda _: desk, skill="inbox", heartbeat=0.05))
    async with Client(server) as client:
        desk.refuse = "skill 'nope' does not exist"
        refused = await client.call_tool(
            "request_approval", {"title": "a", "tool": "t", "args": {}, "skill": "nope"}
        )
        desk.refuse = None
        long_title = await client.call_tool(
            "request_approval", {"title": "x" * 201, "tool": "t", "args": {}}
        )
        huge = await client.call_tool(
            "request_approval", {"title": "a", "tool": "t", "args": {"blob": "x" * 70_000}}
        )

    assert refused.is_error and "skill 'nope' does not exist" in _text(refused)
    assert long_title.is_error and "title" in _text(long_title)
    assert huge.is_error and "args is larger than" in _text(huge)
    assert desk.asks == []
