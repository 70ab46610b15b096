"""A remote A2A agent's questions, answered from the inbox.

An A2A task that needs something from its user stops in `input-required` (or
`auth-required`) with a status message saying what. `follow` watches such a task; each time
it stops there, it asks a person through Pizza Bot (a question card whose text is the agent's
message), waits for the answer, and sends it back on the same task (a message with the
task's `taskId` and `contextId`), until the task ends:

    input-required / auth-required → a question card; its answer is the next message
                                     ({"answer": text} as text, any other form as a data part)
    declined or expired            → the task is cancelled (where the agent allows it)
    submitted / working            → read again every `interval` seconds
    completed, failed, cancelled, rejected → `follow` returns the task

Every answer sent back carries its request's id in the message id, so a watcher that restarts
finds the same question card instead of making another. Nothing from the remote agent is read
unbounded: `capped_http` refuses a response over `max_bytes`.

Needs the `a2a` extra (`pip install 'pizzabot-client[a2a]'`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import httpx

if TYPE_CHECKING:
    from a2a.client import Client
    from a2a.types import AgentCard, Message, Task

    from pizzabot.client import AsyncInbox, RequestState

__all__ = ["MAX_BYTES", "ResponseTooLarge", "capped_http", "connect", "follow", "start"]

#: The most one response of a remote agent may carry (a card, a task).
MAX_BYTES = 1024 * 1024
_ASKING = ("TASK_STATE_INPUT_REQUIRED", "TASK_STATE_AUTH_REQUIRED")
_ENDED = (
    "TASK_STATE_COMPLETED",
    "TASK_STATE_FAILED",
    "TASK_STATE_CANCELED",
    "TASK_STATE_REJECTED",
)


class ResponseTooLarge(httpx.HTTPError):
    """A remote agent sent more than the cap."""


class _Capped(httpx.AsyncByteStream):
    def __init__(self, inner: httpx.AsyncByteStream, cap: int) -> None:
        self._inner, self._cap = inner, cap

    async def __aiter__(self) -> Any:
        seen = 0
        async for chunk in self._inner:
            seen += len(chunk)
            if seen > self._cap:
                raise ResponseTooLarge(f"the remote agent sent more than {self._cap} bytes")
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()


class _CappedTransport(httpx.AsyncBaseTransport):
    def __init__(self, cap: int) -> None:
        self._inner = httpx.AsyncHTTPTransport()
        self._cap = cap

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self._inner.handle_async_request(request)
        assert isinstance(response.stream, httpx.AsyncByteStream)
        response.stream = _Capped(response.stream, self._cap)
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


def capped_http(*, bearer: str | None = None, max_bytes: int = MAX_BYTES) -> httpx.AsyncClient:
    """An HTTP client for a remote agent: every response capped, its token if it needs one."""
    headers = {"Authorization": f"Bearer {bearer}"} if bearer else {}
    return httpx.AsyncClient(
        transport=_CappedTransport(max_bytes), headers=headers, timeout=30, follow_redirects=False
    )


async def connect(url: str, http: httpx.AsyncClient) -> tuple[Client, AgentCard]:
    """The SDK's client for the agent at `url`, and its card (read through `http`)."""
    from a2a.client import A2ACardResolver, ClientConfig, ClientFactory

    card = await A2ACardResolver(http, url).get_agent_card()
    return ClientFactory(ClientConfig(httpx_client=http, streaming=False)).create(card), card


async def _sent(client: Client, message: Message) -> Task:
    from a2a.types import SendMessageRequest

    last: Task | None = None
    async for response in client.send_message(SendMessageRequest(message=message)):
        if response.HasField("task"):
            last = response.task
        elif response.HasField("message"):
            raise ValueError("the remote agent answered with a message, not a task")
    if last is None:
        raise ValueError("the remote agent answered with no task")
    return last


async def start(client: Client, text: str, *, message_id: str) -> Task:
    """Send `text` to the remote agent as a new task's first message."""
    from a2a.types import Message, Part, Role

    return await _sent(
        client, Message(message_id=message_id, role=Role.ROLE_USER, parts=[Part(text=text)])
    )


def _state(task: Task) -> str:
    from a2a.types import TaskState

    return str(TaskState.Name(task.status.state))


def _asked(task: Task) -> str:
    """What the agent says it needs, in words."""
    words = [p.text for p in task.status.message.parts if p.WhichOneof("content") == "text"]
    said = "\n".join(w.strip() for w in words if w.strip())
    if _state(task) == "TASK_STATE_AUTH_REQUIRED":
        said = f"(The agent asks for authorization.) {said}".strip()
    return said[:4000] or "The agent needs input to go on."


def _answer(task: Task, state: RequestState) -> Message:
    from a2a.types import Message, Part, Role
    from google.protobuf.struct_pb2 import Value

    values = dict(state.args or {})
    if set(values) == {"answer"} and isinstance(values["answer"], str):
        parts = [Part(text=values["answer"])]
    else:
        data = Value()
        data.struct_value.update(values)
        parts = [Part(data=data)]
    return Message(
        message_id=f"pizzabot-{state.id}",
        task_id=task.id,
        context_id=task.context_id,
        role=Role.ROLE_USER,
        parts=parts,
    )


async def follow(
    inbox: AsyncInbox,
    skill: str,
    client: Client,
    task: Task,
    *,
    agent: str = "A2A agent",
    timeout: float | None = None,
    interval: float = 2.0,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> Task:
    """Answer the task's questions from the inbox until it ends; return it as it ended.
    `timeout`: seconds each question waits for a person (then it expires)."""
    from a2a.types import CancelTaskRequest, GetTaskRequest

    rounds = 0
    while _state(task) not in _ENDED:
        if _state(task) not in _ASKING:
            await sleep(interval)
            task = await client.get_task(GetTaskRequest(id=task.id))
            continue
        asked = await inbox.question(
            skill,
            question=_asked(task),
            title=f"{agent}: {_asked(task).splitlines()[0]}"[:200],
            timeout=timeout,
            idempotency_key=f"a2a:{task.id}:{task.status.message.message_id or rounds}",
        )
        rounds += 1
        decided = await inbox.until_decided(asked.id)
        if decided.status != "answered":
            try:
                return await client.cancel_task(CancelTaskRequest(id=task.id))
            except Exception:  # the agent may not cancel: the task stays as it is
                return await client.get_task(GetTaskRequest(id=task.id))
        task = await _sent(client, _answer(task, decided))
    return task
