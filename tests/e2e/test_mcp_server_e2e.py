"""Pizza Bot's own MCP server, end to end: the official MCP client calls `request_approval`
and `ask_human` over stdio (`pizzabot mcp`, a subprocess talking to a real server process)
and over streamable HTTP (`/mcp` on that server, with the API token), a person decides
through the API, and the tool result carries the decision."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator
from importlib.metadata import version
from pathlib import Path
from typing import Any

import httpx
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp_types import CallToolResult, TextContent

from tests.peers.raw_http import exchange
from tests.peers.server import TOKEN, ServerProcess

SKILL = """\
name: inbox
description: requests from agents Pizza Bot does not run
tools:
  shell.run:
    policy: ask
    rules:
      - {when: {command: {matches: 'ls( [-\\w./ ]*)?'}}, policy: auto}
      - {when: {command: {matches: '(?s).*rm -rf /.*'}}, policy: deny, reason: never the root}
"""


@contextlib.asynccontextmanager
async def _server(root: Path) -> AsyncIterator[ServerProcess]:
    skills = root / "skills"
    skills.mkdir(parents=True, exist_ok=True)
    (skills / "inbox.yaml").write_text(SKILL)
    server = ServerProcess(
        data_dir=root / "data", skills_dir=skills, env={"PIZZABOT_MCP_SKILL": "inbox"}
    )
    await server.start()
    try:
        yield server
    finally:
        server.stop()


@contextlib.asynccontextmanager
async def _stdio(server: ServerProcess) -> AsyncIterator[ClientSession]:
    env = {**server.env(), "PIZZABOT_URL": server.url, "PIZZABOT_API_TOKEN": TOKEN}
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "pizzabot.bot.main", "mcp"], env=env
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


@contextlib.asynccontextmanager
async def _http(server: ServerProcess, token: str = TOKEN) -> AsyncIterator[ClientSession]:
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        create_mcp_http_client(headers=headers) as http,
        streamable_http_client(f"{server.url}/mcp", http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


class Progress:
    """The progress notifications of one call; `first` is set by the first."""

    def __init__(self) -> None:
        self.messages: list[str | None] = []
        self.first = asyncio.Event()

    async def __call__(self, done: float, total: float | None, message: str | None) -> None:
        self.messages.append(message)
        self.first.set()


async def _item(server: ServerProcess, title: str) -> dict[str, Any]:
    async def find(c: httpx.AsyncClient) -> dict[str, Any] | None:
        items = (await c.get("/api/inbox", params={"box": "action"})).json()["items"]
        return next((i for i in items if i["title"] == title), None)

    found: dict[str, Any] = await server.wait_for(find, what=f"the item {title!r} in Action")
    return found


async def _decide(server: ServerProcess, item_id: str, **body: Any) -> None:
    async with server.client() as c:
        r = await c.post(f"/api/items/{item_id}/decision", json=body)
        assert r.status_code == 200, r.text


async def _action_items(server: ServerProcess, title: str) -> list[dict[str, Any]]:
    async with server.client() as c:
        items = (await c.get("/api/inbox", params={"box": "action", "all": "true"})).json()
    return [i for i in items["items"] if i["title"] == title]


def _text(result: CallToolResult) -> str:
    return "".join(p.text for p in result.content if isinstance(p, TextContent))


def _approval(title: str, **more: Any) -> dict[str, Any]:
    return {
        "title": title,
        "tool": "shell",
        "args": {"command": "rm -rf build"},
        "schema": {"type": "object", "properties": {"command": {"type": "string"}}},
        "risk": {"impact": "high", "reversible": False, "scope": "local"},
        **more,
    }


async def test_stdio_approval_edited_through_the_api_returns_the_final_args(
    tmp_path: Path,
) -> None:
    async with _server(tmp_path) as server, _stdio(server) as session:
        progress = Progress()
        call = asyncio.create_task(
            session.call_tool(
                "request_approval", _approval("Clean the build"), progress_callback=progress
            )
        )
        item = await _item(server, "Clean the build")
        assert item["tool"] == "shell" and item["args"] == {"command": "rm -rf build"}
        async with asyncio.timeout(30):
            await progress.first.wait()
        assert not call.done()
        await _decide(server, item["id"], decision="edit", args={"command": "rm -rf build/tmp"})
        result = await asyncio.wait_for(call, 60)

    assert item["id"] in (progress.messages[0] or "")
    assert not result.is_error, _text(result)
    out = result.structured_content or {}
    assert out["status"] == "edited" and out["approved"] is True
    assert out["args"] == {"command": "rm -rf build/tmp"}
    assert out["item_id"] == item["id"] and out["via"] == "api"
    assert "rm -rf build/tmp" in _text(result)


async def test_http_approval_rejected_through_the_api_returns_the_reason(tmp_path: Path) -> None:
    async with _server(tmp_path) as server, _http(server) as session:
        tools = {t.name for t in (await session.list_tools()).tools}
        assert tools == {"request_approval", "ask_human"}
        progress = Progress()
        call = asyncio.create_task(
            session.call_tool(
                "request_approval", _approval("Wipe the cache"), progress_callback=progress
            )
        )
        item = await _item(server, "Wipe the cache")
        async with asyncio.timeout(30):
            await progress.first.wait()
        await _decide(server, item["id"], decision="reject", reason="not during the release")
        result = await asyncio.wait_for(call, 60)

    out = result.structured_content or {}
    assert out["status"] == "rejected" and out["approved"] is False
    assert out["reason"] == "not during the release"
    assert "not during the release" in _text(result) and "Do not run" in _text(result)


async def test_mcp_over_http_needs_the_token_a_local_host_and_a_bounded_body(
    tmp_path: Path,
) -> None:
    hello = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    }
    accept = {"Accept": "application/json, text/event-stream"}
    async with _server(tmp_path) as server, httpx.AsyncClient(base_url=server.url) as c:
        missing = await c.post("/mcp", json=hello, headers=accept)
        wrong = await c.post(
            "/mcp", json=hello, headers={**accept, "Authorization": "Bearer wrong-token"}
        )
        rebound = await c.post(
            "/mcp",
            json=hello,
            headers={**accept, "Authorization": f"Bearer {TOKEN}", "Host": "evil.example:80"},
        )
        fine = await c.post(
            "/mcp", json=hello, headers={**accept, "Authorization": f"Bearer {TOKEN}"}
        )
        # A 2 MiB body declared, only its start sent: the answer comes before the body.
        big = "POST /mcp HTTP/1.1\nHost: 127.0.0.1\nContent-Type: application/json\n"
        big += f"Accept: {accept['Accept']}\nContent-Length: {2 * 1024 * 1024}\n"
        big_unsigned, _ = await exchange(server.port, big, b"{")
        big_signed, _ = await exchange(server.port, f"{big}Authorization: Bearer {TOKEN}\n", b"{")

    assert missing.status_code == 401 and missing.json() == {"detail": "missing or wrong API token"}
    assert wrong.status_code == 401
    assert rebound.status_code == 421  # the SDK's DNS-rebinding check
    assert fine.status_code == 200 and "protocolVersion" in fine.text
    assert big_unsigned == 401  # the token comes before the body
    assert big_signed == 413  # and the body limit before the MCP SDK


async def test_http_client_that_drops_and_asks_again_with_its_key_gets_the_same_item(
    tmp_path: Path,
) -> None:
    ask = _approval("Rotate the keys", idempotency_key="rotate-2026-05")
    async with _server(tmp_path) as server:
        async with _http(server) as session:
            dropped = asyncio.create_task(session.call_tool("request_approval", ask))
            first = await _item(server, "Rotate the keys")
            dropped.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await dropped
        await _decide(server, first["id"], decision="approve")
        async with _http(server) as session:
            result = await asyncio.wait_for(session.call_tool("request_approval", ask), 60)
        items = await _action_items(server, "Rotate the keys")

    out = result.structured_content or {}
    assert out["item_id"] == first["id"] and out["status"] == "approved"
    assert out["args"] == {"command": "rm -rf build"}
    assert [i["id"] for i in items] == [first["id"]]


async def test_stdio_client_restarted_asking_the_same_again_waits_on_the_same_item(
    tmp_path: Path,
) -> None:
    ask = _approval("Restart the database")
    async with _server(tmp_path) as server:
        async with _stdio(server) as session:
            dropped = asyncio.create_task(session.call_tool("request_approval", ask))
            first = await _item(server, "Restart the database")
            dropped.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await dropped
        async with _stdio(server) as session:
            progress = Progress()
            call = asyncio.create_task(
                session.call_tool("request_approval", ask, progress_callback=progress)
            )
            async with asyncio.timeout(30):
                await progress.first.wait()
            await _decide(server, first["id"], decision="approve")
            result = await asyncio.wait_for(call, 60)
        items = await _action_items(server, "Restart the database")

    assert first["id"] in (progress.messages[0] or "")
    out = result.structured_content or {}
    assert out["item_id"] == first["id"] and out["status"] == "approved"
    assert [i["id"] for i in items] == [first["id"]]


async def test_ask_human_answered_through_the_api_returns_the_answer(tmp_path: Path) -> None:
    async with _server(tmp_path) as server, _http(server) as session:
        call = asyncio.create_task(
            session.call_tool("ask_human", {"question": "Which day suits the migration?"})
        )
        item = await _item(server, "Which day suits the migration?")
        await _decide(server, item["id"], decision="edit", args={"answer": "Tuesday"})
        result = await asyncio.wait_for(call, 60)

    out = result.structured_content or {}
    assert out["action"] == "accept", _text(result)
    assert out["content"] == {"answer": "Tuesday"}
    assert "Tuesday" in _text(result)


async def test_the_skills_rules_decide_at_once_without_a_card(tmp_path: Path) -> None:
    async with _server(tmp_path) as server, _http(server) as session:
        listing = await asyncio.wait_for(
            session.call_tool(
                "request_approval",
                {"title": "List", "tool": "shell.run", "args": {"command": "ls -la"}},
            ),
            60,
        )
        root = await asyncio.wait_for(
            session.call_tool(
                "request_approval",
                {"title": "Wipe /", "tool": "shell.run", "args": {"command": "rm -rf /"}},
            ),
            60,
        )
        asked = await _action_items(server, "List") + await _action_items(server, "Wipe /")

    allowed, denied = listing.structured_content or {}, root.structured_content or {}
    assert allowed["status"] == "approved" and allowed["args"] == {"command": "ls -la"}
    assert denied["status"] == "rejected" and "never the root" in (denied["reason"] or "")
    assert [i for i in asked if i["status"] == "pending"] == []


async def test_a_decided_approval_is_never_handed_to_a_new_identical_call(
    tmp_path: Path,
) -> None:
    """The same content joins a request only while it is pending: once decided, the same
    call asks anew (a grant is the way to say "don't ask again"), and every answer is
    audited. The agent holds an ask token, which is all `/mcp` needs."""
    async with _server(tmp_path) as server:
        async with server.client() as c:
            made = await c.post("/api/tokens", json={"name": "mcp-agent", "scope": "ask"})
        assert made.status_code == 201, made.text
        agent = made.json()["token"]
        async with _http(server, agent) as session:
            first = asyncio.create_task(
                session.call_tool("request_approval", _approval("Drop the cache"))
            )
            item = await _item(server, "Drop the cache")
            await _decide(server, item["id"], decision="approve")
            approved = await asyncio.wait_for(first, 60)
            again = asyncio.create_task(
                session.call_tool("request_approval", _approval("Drop the cache"))
            )

            async def second_card(c: httpx.AsyncClient) -> dict[str, Any] | None:
                found = await _action_items(server, "Drop the cache")
                return next((i for i in found if i["status"] == "pending"), None)

            fresh = await server.wait_for(second_card, what="a new card for the second call")
            assert not again.done()  # it waits for a person: not the first one's approval
            await _decide(server, fresh["id"], decision="reject", reason="once was enough")
            rejected = await asyncio.wait_for(again, 60)
        async with server.client() as c:
            entries = (await c.get("/api/audit", params={"limit": 500})).json()["items"]

    assert (approved.structured_content or {})["status"] == "approved"
    out = rejected.structured_content or {}
    assert out["status"] == "rejected" and out["reason"] == "once was enough"
    assert fresh["id"] != item["id"] and fresh["requested_by"] == "token:mcp-agent"
    actions = [e["action"] for e in entries if e["actor"] == "token:mcp-agent"]
    assert actions.count("request_filed") == 2 and actions.count("request_answered") == 2


async def test_the_server_names_its_release_over_both_transports(tmp_path: Path) -> None:
    async with _server(tmp_path) as server:
        async with _stdio(server) as session:
            stdio_info = session.server_info
        async with _http(server) as session:
            http_info = session.server_info
    assert stdio_info is not None and http_info is not None
    assert (stdio_info.name, stdio_info.version) == ("pizzabot", version("pizzabot-client"))
    assert (http_info.name, http_info.version) == ("pizzabot", version("pizzabot"))
