"""The MCP Tasks extension on `/mcp`, end to end: the official Python client, declaring the
extension (`tests.peers.mcp_tasks`), calls `request_approval` and `ask_human` on a served
bot over streamable HTTP with an `ask` token; the call answers with a task at once; a person
decides through the API with a `decide` token; `tasks/get` then carries the tool's result.
A dropped client comes back to the same task, another token cannot see it, and
`tasks/cancel` withdraws the request from everyone's inbox."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import yaml
from mcp import StdioServerParameters
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

from tests.peers.mcp_tasks import CreatedTask, TasksClient, cancel_task, get_task
from tests.peers.server import ServerProcess

pytestmark = pytest.mark.asyncio(loop_scope="module")

SKILL = {
    "name": "inbox",
    "description": "requests from agents Pizza Bot does not run",
    "people": {"carol": {"email": "carol@corp.example"}},
    "approvers": ["carol"],
    "tools": {"shell": {"policy": "ask"}},
}
APPROVAL = {
    "tool": "shell",
    "args": {"command": "rm -rf build"},
    "schema": {"type": "object", "properties": {"command": {"type": "string"}}},
}


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def server(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[ServerProcess]:
    root: Path = tmp_path_factory.mktemp("mcp-tasks")
    skills = root / "skills"
    skills.mkdir()
    (skills / "inbox.yaml").write_text(yaml.safe_dump(SKILL))
    proc = ServerProcess(
        data_dir=root / "data", skills_dir=skills, env={"PIZZABOT_MCP_SKILL": "inbox"}
    )
    await proc.start()
    try:
        yield proc
    finally:
        proc.stop()


async def _token(server: ServerProcess, name: str, scope: str, person: str | None = None) -> str:
    body = {"name": name, "scope": scope, **({"person": person} if person else {})}
    async with server.client() as c:
        r = await c.post("/api/tokens", json=body)
    assert r.status_code == 201, r.text
    return str(r.json()["token"])


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def agent(server: ServerProcess) -> str:
    return await _token(server, "coding-agent", "ask")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def carol(server: ServerProcess) -> str:
    return await _token(server, "carol-phone", "decide", person="carol")


@contextlib.asynccontextmanager
async def _client(
    server: ServerProcess, token: str, *, tasks: TasksClient | None = None
) -> AsyncIterator[Client]:
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    async with http:
        transport = streamable_http_client(f"{server.url}/mcp", http_client=http)
        extensions = [tasks] if tasks is not None else None
        async with Client(transport, mode="2026-07-28", extensions=extensions) as client:
            yield client


async def _task(client: Client, tool: str, args: dict[str, Any]) -> CreatedTask:
    """The call's own answer, not finished by the extension's polling."""
    created = await client.session.call_tool(tool, args, allow_claimed=True)
    assert isinstance(created, CreatedTask), created
    return created


async def _item(server: ServerProcess, title: str) -> dict[str, Any]:
    async with server.client() as c:
        items = (await c.get("/api/inbox", params={"box": "action", "all": "true"})).json()
    found = [i for i in items["items"] if i["title"] == title]
    assert len(found) == 1, found
    return found[0]


async def _decide(server: ServerProcess, token: str, item_id: str, **body: Any) -> int:
    async with server.client(token) as c:
        r = await c.post(f"/api/items/{item_id}/decision", json=body)
    return r.status_code


async def test_a_task_comes_back_at_once_and_carries_the_edit_a_person_made(
    server: ServerProcess, agent: str, carol: str
) -> None:
    async with _client(server, agent, tasks=TasksClient()) as client:
        created = await _task(client, "request_approval", {"title": "Clean up", **APPROVAL})
        item = await _item(server, "Clean up")
        waiting = await get_task(client.session, created.task_id)
        edited = {"command": "rm -rf build/tmp"}
        status = await _decide(server, carol, item["id"], decision="edit", args=edited)
        done = await get_task(client.session, created.task_id)

    assert created.status == "working" and item["id"] in (created.status_message or "")
    assert item["status"] == "pending"  # the card is out while the call has returned
    assert waiting.status == "working" and waiting.ttl_ms is None
    assert status == 200
    assert done.status == "completed" and done.result is not None
    out = done.result["structuredContent"]
    assert (out["status"], out["approved"], out["args"]) == ("edited", True, edited)
    assert out["decided_by"] == "carol" and out["item_id"] == item["id"]


async def test_the_sdk_client_with_the_extension_waits_for_the_answer_through_the_task(
    server: ServerProcess, agent: str, carol: str
) -> None:
    import asyncio

    tasks = TasksClient(poll=0.1)
    async with _client(server, agent, tasks=tasks) as client:
        call = asyncio.create_task(
            client.call_tool("ask_human", {"question": "Which region first?"})
        )
        async with asyncio.timeout(30):
            while not tasks.seen:
                await asyncio.sleep(0.05)
        item = await _item(server, "Which region first?")
        answered = await _decide(server, carol, item["id"], decision="edit", args={"answer": "eu"})
        result = await asyncio.wait_for(call, 30)

    assert answered == 200
    out = result.structured_content or {}
    assert (out["action"], out["content"]) == ("accept", {"answer": "eu"})


async def test_a_dropped_client_finds_its_task_and_no_one_else_can(
    server: ServerProcess, agent: str, carol: str
) -> None:
    other = await _token(server, "other-agent", "ask")
    async with _client(server, agent, tasks=TasksClient()) as client:
        created = await _task(client, "request_approval", {"title": "Deploy", **APPROVAL})
    item = await _item(server, "Deploy")
    assert await _decide(server, carol, item["id"], decision="approve") == 200

    async with _client(server, agent, tasks=TasksClient()) as again:
        back = await get_task(again.session, created.task_id)
        request_id = created.task_id.rpartition(".")[0]
        with pytest.raises(MCPError) as forged:
            await get_task(again.session, f"{request_id}.{'0' * 32}")
    async with _client(server, other, tasks=TasksClient()) as stranger:
        with pytest.raises(MCPError) as foreign:
            await get_task(stranger.session, created.task_id)
        with pytest.raises(MCPError) as foreign_cancel:
            await cancel_task(stranger.session, created.task_id)
    async with _client(server, agent) as undeclared:
        with pytest.raises(MCPError) as missing:
            await get_task(undeclared.session, created.task_id)

    assert back.status == "completed" and back.result is not None
    assert back.result["structuredContent"]["status"] == "approved"
    assert forged.value.error.code == foreign.value.error.code == -32602
    assert foreign_cancel.value.error.code == -32602
    assert missing.value.error.code == -32021  # the client did not declare the extension


async def test_cancel_withdraws_the_request_from_every_inbox(
    server: ServerProcess, agent: str, carol: str
) -> None:
    async with _client(server, agent, tasks=TasksClient()) as client:
        created = await _task(client, "request_approval", {"title": "Drop table", **APPROVAL})
        await cancel_task(client.session, created.task_id)
        after = await get_task(client.session, created.task_id)
    item = await _item(server, "Drop table")
    late = await _decide(server, carol, item["id"], decision="approve")

    assert after.status == "cancelled" and "withdrawn" in (after.status_message or "")
    assert (item["status"], item["reason"]) == ("cancelled", "withdrawn by token:coding-agent")
    assert late == 409  # nobody approves what was withdrawn


async def test_a_client_without_the_extension_gets_the_blocking_call(
    server: ServerProcess, agent: str, carol: str
) -> None:
    import asyncio

    async with _client(server, agent) as client:
        call = asyncio.create_task(
            client.call_tool("request_approval", {"title": "Restart", **APPROVAL})
        )
        async with server.client() as c:

            async def pending(_: Any) -> bool:
                items = (await c.get("/api/inbox", params={"box": "action"})).json()["items"]
                return any(i["title"] == "Restart" for i in items)

            await server.wait_for(pending, what="the Restart card")
        item = await _item(server, "Restart")
        assert not call.done()
        assert await _decide(server, carol, item["id"], decision="reject", reason="not now") == 200
        result = await asyncio.wait_for(call, 30)

    out = result.structured_content or {}
    assert (out["status"], out["reason"]) == ("rejected", "not now")


async def test_stdio_tasks_outlive_the_process_and_are_the_tokens_on_either_transport(
    server: ServerProcess, agent: str
) -> None:
    env = {**server.env(), "PIZZABOT_URL": server.url, "PIZZABOT_API_TOKEN": agent}
    stdio = StdioServerParameters(
        command=sys.executable, args=["-m", "pizzabot.bot.main", "mcp"], env=env
    )
    async with Client(stdio, mode="2026-07-28", extensions=[TasksClient()]) as first:
        created = await _task(first, "request_approval", {"title": "Purge CDN", **APPROVAL})
    async with _client(server, agent, tasks=TasksClient()) as over_http:
        seen = await get_task(over_http.session, created.task_id)
    async with Client(stdio, mode="2026-07-28", extensions=[TasksClient()]) as second:
        await cancel_task(second.session, created.task_id)
        after = await get_task(second.session, created.task_id)
    item = await _item(server, "Purge CDN")

    assert seen.status == "working" and seen.task_id == created.task_id
    assert after.status == "cancelled" and item["status"] == "cancelled"


async def test_a_requester_withdraws_over_the_api_and_a_stranger_cannot(
    server: ServerProcess, agent: str, carol: str
) -> None:
    other = await _token(server, "third-agent", "ask")
    body = {"skill": "inbox", "title": "Flush queue", **APPROVAL}
    async with server.client(agent) as c:
        state = (await c.post("/api/requests", json=body)).json()
        async with server.client(other) as stranger:
            refused = await stranger.post(f"/api/requests/{state['id']}/cancel")
        withdrawn = await c.post(f"/api/requests/{state['id']}/cancel")
        again = await c.post(f"/api/requests/{state['id']}/cancel")
    late = await _decide(server, carol, state["item_id"], decision="approve")

    assert refused.status_code == 404
    assert withdrawn.status_code == 200
    out = withdrawn.json()
    assert (out["status"], out["reason"]) == ("expired", "withdrawn by token:coding-agent")
    assert again.status_code == 200 and again.json()["status"] == "expired"
    assert late == 409
