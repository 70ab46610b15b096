"""The "crm" MCP test server, reached with the official client over stdio, HTTP and in-process."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from mcp.client import Client
from mcp_types import CallToolResult, TextContent

from tests.peers.mcp_tools import build_server, read_log, serve_http, stdio_params
from tests.waiting import eventually


@contextlib.asynccontextmanager
async def _connect(transport: str, log: Path) -> AsyncIterator[Client]:
    if transport == "stdio":
        async with Client(stdio_params(log=log)) as client:
            yield client
    else:
        async with serve_http(log=log) as url, Client(url) as client:
            yield client


def _text(result: CallToolResult) -> str:
    return "".join(part.text for part in result.content if isinstance(part, TextContent))


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_tools_schemas_calls_and_errors(transport: str, tmp_path: Path) -> None:
    log = tmp_path / "tools.jsonl"
    async with _connect(transport, log) as client:
        listed = await client.list_tools()
        tools = {tool.name: tool for tool in listed.tools}
        assert set(tools) == {"send_email", "lookup", "slow", "fail"}

        schema: dict[str, Any] = tools["send_email"].input_schema
        props = schema["properties"]
        assert schema["required"] == ["to", "subject", "body"]
        assert props["priority"]["enum"] == ["low", "normal", "high"]
        assert props["priority"]["default"] == "normal"
        assert (
            props["copies"]["type"],
            props["copies"]["minimum"],
            props["copies"]["maximum"],
        ) == (
            "integer",
            1,
            10,
        )
        assert props["receipt"]["type"] == "boolean"
        assert {"type": "null"} in props["cc"]["anyOf"]
        assert props["to"]["description"] == "Recipient's email address."
        assert "cannot be unsent" in (tools["send_email"].description or "")

        args = {"to": "ann@example.test", "subject": "Pizza", "body": "It's here.", "copies": 2}
        sent = await client.call_tool("send_email", args)
        assert not sent.is_error
        assert _text(sent) == "sent to ann@example.test"

        for bad in (
            {**args, "copies": 11},
            {**args, "priority": "urgent"},
            {"to": "ann@example.test", "subject": "no body"},
        ):
            refused = await client.call_tool("send_email", bad)
            assert refused.is_error, bad
            assert "validation error" in _text(refused)

        failed = await client.call_tool("fail", {})
        assert failed.is_error
        assert "the CRM is down" in _text(failed)

        found = await client.call_tool("lookup", {"query": "Ann"})
        assert not found.is_error
        assert _text(found) == "customer 'Ann': id C6051, status active"

    lines = read_log(log)
    assert [(line["tool"], line["event"]) for line in lines] == [
        ("send_email", "called"),
        ("fail", "called"),
        ("lookup", "called"),
    ]
    assert lines[0]["args"] == {
        "to": "ann@example.test",
        "subject": "Pizza",
        "body": "It's here.",
        "priority": "normal",
        "copies": 2,
        "cc": None,
        "receipt": False,
    }


async def test_leaving_the_client_mid_call_ends_the_stdio_server(tmp_path: Path) -> None:
    log = tmp_path / "tools.jsonl"
    async with Client(stdio_params(log=log)) as client:
        call = asyncio.create_task(client.call_tool("slow", {"seconds": 60}))

        def slow_started() -> list[dict[str, Any]]:
            assert not call.done(), "the slow call ended before it was left"
            return read_log(log)

        await eventually(slow_started, what="the slow call to start")
        call.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await call
    [started] = read_log(log)
    assert (started["tool"], started["event"]) == ("slow", "started")
    with pytest.raises(ProcessLookupError):
        os.kill(started["pid"], 0)


async def test_in_process_client_needs_no_subprocess(tmp_path: Path, monkeypatch: Any) -> None:
    log = tmp_path / "tools.jsonl"
    monkeypatch.setenv("MCP_TOOLS_LOG", str(log))
    async with Client(build_server()) as client:
        result = await client.call_tool("slow", {"seconds": 0})
    assert _text(result) == "slept 0s"
    assert [line["event"] for line in read_log(log)] == ["started", "finished"]
    assert read_log(log)[0]["pid"] == os.getpid()
