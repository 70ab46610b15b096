"""A Tasks-capable MCP client (`io.modelcontextprotocol/tasks`, 2026-07-28) on the official
Python SDK, which has the client extension framework but no Tasks extension: a claim on the
`task` result that polls `tasks/get` until the task ends, and the `tasks/*` requests for a
test that drives a task by hand (drops the client, comes back, cancels)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, Literal

from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp.client.session import ClientSession
from mcp_types import CallToolResult, Request, RequestParams, Result
from pydantic import ConfigDict, Field

TASKS = "io.modelcontextprotocol/tasks"


class CreatedTask(Result):
    """A `tools/call` answered with a task."""

    model_config = ConfigDict(extra="allow")

    result_type: Literal["task"] = Field(alias="resultType")
    task_id: str = Field(alias="taskId")
    status: str
    status_message: str | None = Field(default=None, alias="statusMessage")
    poll_interval_ms: int | None = Field(default=None, alias="pollIntervalMs")


class TaskState(Result):
    """`tasks/get`'s answer: the task, with `result` once completed."""

    model_config = ConfigDict(extra="allow")

    task_id: str = Field(alias="taskId")
    status: str
    status_message: str | None = Field(default=None, alias="statusMessage")
    created_at: str = Field(alias="createdAt")
    last_updated_at: str = Field(alias="lastUpdatedAt")
    ttl_ms: int | None = Field(alias="ttlMs")
    poll_interval_ms: int | None = Field(default=None, alias="pollIntervalMs")
    result: dict[str, Any] | None = None


class Ack(Result):
    model_config = ConfigDict(extra="allow")


class TaskParams(RequestParams):
    task_id: str = Field(alias="taskId")


class GetTask(Request[TaskParams, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    params: TaskParams
    name_param = "taskId"


class CancelTask(Request[TaskParams, Literal["tasks/cancel"]]):
    method: Literal["tasks/cancel"] = "tasks/cancel"
    params: TaskParams
    name_param = "taskId"


async def get_task(session: ClientSession, task_id: str) -> TaskState:
    return await session.send_request(GetTask(params=TaskParams(taskId=task_id)), TaskState)


async def cancel_task(session: ClientSession, task_id: str) -> None:
    await session.send_request(CancelTask(params=TaskParams(taskId=task_id)), Ack)


class TasksClient(ClientExtension):
    """Declares the extension and finishes a task result by polling `tasks/get` (every
    `poll` seconds at most, whatever `pollIntervalMs` says, so tests do not sleep long)."""

    identifier = TASKS

    def __init__(self, *, poll: float = 0.2) -> None:
        self.poll = poll
        #: The tasks this client was handed, by id.
        self.seen: list[CreatedTask] = []

    def claims(self) -> Sequence[ResultClaim[Any]]:
        return [ResultClaim(result_type="task", model=CreatedTask, resolve=self._resolve)]

    async def _resolve(self, created: CreatedTask, ctx: ClaimContext) -> CallToolResult:
        self.seen.append(created)
        while True:
            state = await get_task(ctx.session, created.task_id)
            if state.status == "completed" and state.result is not None:
                return CallToolResult.model_validate(state.result)
            if state.status in ("cancelled", "failed"):
                raise RuntimeError(f"task {state.status}: {state.status_message}")
            await asyncio.sleep(self.poll)
