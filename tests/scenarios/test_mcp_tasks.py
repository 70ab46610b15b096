"""The Tasks extension over a desk that can be away, through the official client in-process:
a server that cannot be reached is an error worth asking again (-32603), not a task that is
gone (-32602); once it is back, the task is where it was. (Against a served bot, over both
transports: tests/e2e/test_mcp_tasks_e2e.py.)"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from mcp.client import Client
from mcp.shared.exceptions import MCPError

from pizzabot.client.mcp.desk import DeskAway
from pizzabot.client.mcp.tasks import Tasks
from pizzabot.client.mcp.tools import Asking, build_server
from pizzabot.client.wire import RequestBody, RequestState
from tests.peers.mcp_tasks import CreatedTask, TasksClient, get_task


class AwayDesk:
    """One pending request; `away` makes every read fail as an unreachable server does."""

    binding = b"agent-token"

    def __init__(self) -> None:
        self.away = False
        self.state = RequestState(
            id="5f2c0a9e1b7d4c33",
            item_id="i1",
            kind="approval",
            status="pending",
            url="http://127.0.0.1:8787/items/i1",
            created_at=datetime(2026, 7, 28, 9, 0, tzinfo=UTC),
        )

    async def submit(self, body: RequestBody, *, key: str) -> RequestState:
        return self.state.model_copy(update={"created": True})

    async def wait(self, request_id: str, seconds: float) -> RequestState:
        if self.away:
            raise DeskAway("connection refused")
        return self.state

    async def withdraw(self, request_id: str) -> RequestState:
        return await self.wait(request_id, 0)


async def test_an_unreachable_inbox_is_worth_asking_again_and_the_task_outlives_it() -> None:
    desk = AwayDesk()
    tasks = Tasks(desk_for=lambda _: desk, poll_ms=1000)
    server = build_server(Asking(desk_for=lambda _: desk, skill="inbox"), extensions=[tasks])
    args = {"title": "Deploy", "tool": "deploy", "args": {"env": "prod"}}
    async with Client(server, mode="2026-07-28", extensions=[TasksClient()]) as client:
        created = await client.session.call_tool("request_approval", args, allow_claimed=True)
        assert isinstance(created, CreatedTask)
        desk.away = True
        with pytest.raises(MCPError) as away:
            await get_task(client.session, created.task_id)
        desk.away = False
        back = await get_task(client.session, created.task_id)

    assert away.value.error.code == -32603 and "ask again" in away.value.error.message
    assert back.status == "working" and back.task_id == created.task_id
