"""The MCP Tasks extension (`io.modelcontextprotocol/tasks`, protocol 2026-07-28) for the
tools that ask a person: a client that declares it gets a task at once instead of a call
that waits, then follows it with `tasks/get` and may withdraw it with `tasks/cancel`.

A person may take hours; a task lets the client hang up and come back. A task is not a new
thing on the server: it *is* the request the tool filed (the same item, cards, rules,
audit), so nothing is lost when the client drops, and any server process sharing the
database answers `tasks/get`. Its id is the request's id and a MAC of it keyed with the
token that made it: unguessable (128 bits), and only that token reads or cancels it (the
inbox also shows an `ask` token only its own requests).

| request | task |
| --- | --- |
| pending (or halted by the kill switch) | `working`, `statusMessage` names the item's page |
| decided, answered, declined, expired | `completed`, `result` the tool's own result |
| withdrawn (`tasks/cancel`) or its run cancelled | `cancelled` |

The extension's `input_required` asks the *client* for input (`inputRequests`, answered
with `tasks/update`); the person asked here is not the client, so a task waiting on them is
`working`, and `tasks/update` has nothing to take. A request the skill's rules or grants
decide as it is made comes back as the plain result, and so does a refused one (a tool
error). The official Python SDK (2.3) has the extension framework (`Extension`, tool-call
interception, extra methods) but no Tasks extension: this is built on that public API.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Protocol

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.extension import Extension, MethodBinding
from mcp.server.mcpserver import require_client_extension
from mcp.shared.exceptions import MCPError
from mcp_types import INTERNAL_ERROR, INVALID_PARAMS, CallToolRequestParams, RequestParams
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ConfigDict, Field

from pizzabot.client.mcp.desk import DeskAway, DeskError
from pizzabot.client.mcp.tools import TOOLS, filed_only, result_of
from pizzabot.client.wire import RequestState

__all__ = ["TASKS", "TaskDesk", "TaskParams", "Tasks", "task_of"]

TASKS = "io.modelcontextprotocol/tasks"
#: Hex digits of the MAC in a task id (128 bits).
MAC_HEX = 32
#: The longest task id taken (a request id, a dot, the MAC).
MAX_TASK_ID = 200


class TaskDesk(Protocol):
    """What a task needs of the inbox: a request's state, its withdrawal, and the secret of
    the caller's that its task ids are bound to."""

    binding: bytes

    async def wait(self, request_id: str, seconds: float) -> RequestState: ...

    async def withdraw(self, request_id: str) -> RequestState: ...


class TaskParams(RequestParams):
    """`tasks/get`, `tasks/cancel` and `tasks/update` name a task (`tasks/update` carries
    `inputResponses` too, which this server never asks for)."""

    model_config = ConfigDict(extra="allow")

    task_id: str = Field(alias="taskId", min_length=1, max_length=MAX_TASK_ID)


def _mac(binding: bytes, request_id: str) -> str:
    digest = hmac.new(binding, f"pizzabot-mcp-task:{request_id}".encode(), hashlib.sha256)
    return digest.hexdigest()[:MAC_HEX]


def task_id_of(binding: bytes, request_id: str) -> str:
    return f"{request_id}.{_mac(binding, request_id)}"


def request_id_of(binding: bytes, task_id: str) -> str:
    """The request a task id names, when the caller's `binding` made it; else not found
    (the same answer as for a task that never was)."""
    request_id, _, mac = task_id.rpartition(".")
    if not binding or not request_id or not hmac.compare_digest(mac, _mac(binding, request_id)):
        raise _not_found()
    return request_id


def _not_found() -> MCPError:
    return MCPError(code=INVALID_PARAMS, message="Failed to retrieve task: Task not found")


def _failed(exc: DeskError) -> MCPError:
    """A task the inbox says is not there (or not the caller's) is not found; an inbox that
    could not be reached is an internal error, worth asking again."""
    if isinstance(exc, DeskAway):
        return MCPError(code=INTERNAL_ERROR, message="Pizza Bot could not be reached; ask again")
    return _not_found()


def _iso(at: datetime | None) -> str:
    return (at or datetime.now(UTC)).isoformat().replace("+00:00", "Z")


def _status(answer: RequestState) -> str:
    if answer.pending or answer.status == "halted":
        return "working"
    withdrawn = answer.status == "expired" and answer.decided_by not in (None, "timeout")
    return "cancelled" if withdrawn else "completed"


def task_of(answer: RequestState, *, binding: bytes, poll_ms: int) -> dict[str, Any]:
    """The task of a request, as `tasks/get` answers it (without `resultType`)."""
    status = _status(answer)
    task: dict[str, Any] = {
        "taskId": task_id_of(binding, answer.id),
        "status": status,
        "createdAt": _iso(answer.created_at),
        "lastUpdatedAt": _iso(answer.decided_at or answer.created_at),
        "ttlMs": None,  # the request lives as long as the server keeps it
        "pollIntervalMs": poll_ms,
    }
    if status == "working":
        waiting = f"waiting for a person: {answer.url}"
        task["statusMessage"] = answer.reason if answer.status == "halted" else waiting
    elif status == "cancelled":
        task["statusMessage"] = answer.reason or "cancelled"
    else:
        result = result_of(answer)
        task["statusMessage"] = answer.status
        task["result"] = result.model_dump(by_alias=True, mode="json", exclude_none=True)
    return task


def declared(ctx: ServerRequestContext[Any, Any]) -> bool:
    """Whether this request's client declared the extension (on the 2026-07-28 protocol,
    where a result may be a task at all)."""
    if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        return False
    capabilities = ctx.session.client_capabilities
    extensions = capabilities.extensions if capabilities is not None else None
    return extensions is not None and TASKS in extensions


class Tasks(Extension):
    """Answer `request_approval` and `ask_human` with a task for clients that declare the
    extension; serve `tasks/get`, `tasks/update` and `tasks/cancel`."""

    identifier = TASKS

    def __init__(
        self, *, desk_for: Callable[[ServerRequestContext[Any, Any]], TaskDesk], poll_ms: int
    ) -> None:
        self._desk_for = desk_for
        self._poll_ms = poll_ms

    def methods(self) -> list[MethodBinding]:
        only = frozenset(MODERN_PROTOCOL_VERSIONS)
        return [
            MethodBinding("tasks/get", TaskParams, self._get, protocol_versions=only),
            MethodBinding("tasks/update", TaskParams, self._update, protocol_versions=only),
            MethodBinding("tasks/cancel", TaskParams, self._cancel, protocol_versions=only),
        ]

    async def intercept_tool_call(
        self,
        params: CallToolRequestParams,
        ctx: ServerRequestContext[Any, Any],
        call_next: CallNext,
    ) -> HandlerResult:
        if params.name not in TOOLS or not declared(ctx):
            return await call_next(ctx)
        filed: list[RequestState] = []
        token = filed_only.set(filed)
        try:
            result = await call_next(ctx)
        finally:
            filed_only.reset(token)
        if not filed or not filed[-1].pending:
            return result  # refused, or decided as it was made: the plain result
        binding = self._desk_for(ctx).binding
        return {"resultType": "task", **task_of(filed[-1], binding=binding, poll_ms=self._poll_ms)}

    async def _get(self, ctx: ServerRequestContext[Any, Any], params: TaskParams) -> dict[str, Any]:
        desk, request_id = self._find(ctx, params)
        try:
            answer = await desk.wait(request_id, 0)
        except DeskError as exc:
            raise _failed(exc) from None
        return task_of(answer, binding=desk.binding, poll_ms=self._poll_ms)

    async def _update(
        self, ctx: ServerRequestContext[Any, Any], params: TaskParams
    ) -> dict[str, Any]:
        # No task here asks the client anything: responses are for keys never issued,
        # which a server ignores. The task must still be the caller's.
        await self._get(ctx, params)
        return {}

    async def _cancel(
        self, ctx: ServerRequestContext[Any, Any], params: TaskParams
    ) -> dict[str, Any]:
        desk, request_id = self._find(ctx, params)
        try:
            await desk.withdraw(request_id)
        except DeskError as exc:
            raise _failed(exc) from None
        return {}

    def _find(
        self, ctx: ServerRequestContext[Any, Any], params: TaskParams
    ) -> tuple[TaskDesk, str]:
        require_client_extension(ctx, TASKS)
        try:
            desk = self._desk_for(ctx)
        except DeskError:
            raise _not_found() from None
        return desk, request_id_of(desk.binding, params.task_id)
