"""A scripted model provider on loopback that speaks the OpenAI and Ollama chat protocols.

Tests and `pizzabot bench` reach it through litellm exactly as they would reach a real
provider, so the whole HTTP path (request shaping, streaming, tool-call parsing, usage,
provider errors) is exercised without the internet or a key. What the model says is decided
by a script (see `pizzabot.agent.testing.scripts`); `fail_next` makes the provider misbehave on cue.

The HTTP server runs on its own thread and event loop, while the script runs on the caller's
loop. It has to: after an Ollama call litellm asks `/api/show` for model info with a
*synchronous* request from inside the caller's loop, which an in-loop server could never
answer (the call would hang for good).

    async with ScriptedModelServer(script) as srv:
        await litellm.acompletion(model="openai/x", api_base=srv.openai_base, api_key="x", ...)
        await litellm.acompletion(model="ollama_chat/x", api_base=srv.ollama_base, ...)
"""

from __future__ import annotations

import asyncio
import inspect
import json
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from types import TracebackType
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from pizzabot.agent.testing.scripts import (
    Message,
    Reply,
    Script,
    ToolCall,
    count_role,
    estimate_tokens,
    last_tool_result,
    last_user_text,
    message_text,
    prompt_text,
    reply_text,
    turns,
)

__all__ = [
    "Reply",
    "Script",
    "ScriptedModelServer",
    "ToolCall",
    "count_role",
    "estimate_tokens",
    "last_tool_result",
    "last_user_text",
    "message_text",
    "turns",
]

_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    429: "rate_limit_error",
}


@dataclass(frozen=True)
class _Failure:
    status: int
    retry_after: float | None


@dataclass(frozen=True)
class _Answer:
    """A reply with everything both wire formats need, computed once."""

    text: str
    calls: list[tuple[str, str, dict[str, Any] | str]]  # (id, name, arguments)
    prompt_tokens: int
    completion_tokens: int

    @property
    def finish_reason(self) -> str:
        return "tool_calls" if self.calls else "stop"


class ScriptedModelServer:
    """An in-process model provider on 127.0.0.1 with a free port, used as `async with`."""

    def __init__(self, script: Script, *, host: str = "127.0.0.1") -> None:
        self.script = script
        self.host = host
        self.port = 0
        #: Every request body received, in order, including the ones answered with a failure.
        self.requests: list[dict[str, Any]] = []
        self._failures: list[_Failure] = []
        self._script_errors: list[BaseException] = []
        self._pending: set[asyncio.Task[Any]] = set()
        self._caller_loop: asyncio.AbstractEventLoop | None = None
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._crash: list[BaseException] = []

    @property
    def openai_base(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    @property
    def ollama_base(self) -> str:
        return f"http://{self.host}:{self.port}"

    def fail_next(
        self, status: int = 429, times: int = 1, retry_after: float | None = None
    ) -> None:
        """Answer the next `times` requests with HTTP `status` (and a Retry-After header)."""
        self._failures.extend(_Failure(status, retry_after) for _ in range(times))

    async def __aenter__(self) -> ScriptedModelServer:
        self._caller_loop = asyncio.get_running_loop()
        app = Starlette(
            routes=[
                Route("/v1/chat/completions", self._openai_chat, methods=["POST"]),
                Route("/api/chat", self._ollama_chat, methods=["POST"]),
                Route("/api/show", _ollama_show, methods=["POST"]),
            ]
        )
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, 0))
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(
            app, log_level="warning", access_log=False, lifespan="off", timeout_graceful_shutdown=2
        )
        server = self._server = uvicorn.Server(config)

        def serve() -> None:
            try:
                asyncio.run(server.serve(sockets=[sock]))
            except BaseException as exc:
                self._crash.append(exc)
            finally:
                sock.close()

        self._thread = threading.Thread(target=serve, name=f"model-server-{self.port}", daemon=True)
        self._thread.start()
        while not server.started:
            if not self._thread.is_alive():
                raise RuntimeError("scripted model server stopped before it started") from (
                    self._crash[0] if self._crash else None
                )
            await asyncio.sleep(0.01)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        # A script still sleeping (its client gave up) must not hold the shutdown.
        for task in list(self._pending):
            task.cancel()
        if self._server is not None and self._thread is not None:
            self._server.should_exit = True
            await asyncio.to_thread(self._thread.join)
        if exc is None and self._script_errors:
            raise RuntimeError("the model script raised") from self._script_errors[0]

    # -- shared request handling --------------------------------------------------------

    async def _answer(
        self, request: Request, *, ollama: bool
    ) -> tuple[dict[str, Any], _Failure | _Answer]:
        """Record the body, then return it with either a failure to send or an `_Answer`."""
        body: dict[str, Any] = await request.json()
        self.requests.append(body)
        if self._failures:
            return body, self._failures.pop(0)
        messages = [_from_ollama(m) for m in body["messages"]] if ollama else body["messages"]
        tools: list[dict[str, Any]] = body.get("tools") or []
        try:
            reply = await self._run_script(messages, tools)
        except asyncio.CancelledError:
            return body, _Failure(503, None)
        except Exception as exc:
            self._script_errors.append(exc)
            return body, _Failure(500, None)
        calls = [
            (c.id or f"call_{len(messages)}_{i}", c.name, c.arguments)
            for i, c in enumerate(reply.tool_calls)
        ]
        return body, _Answer(
            text=reply.text or "",
            calls=calls,
            prompt_tokens=estimate_tokens(prompt_text(messages)),
            completion_tokens=estimate_tokens(reply_text(reply)),
        )

    async def _run_script(self, messages: list[Message], tools: list[dict[str, Any]]) -> Reply:
        """Run the script on the caller's loop, so it may share state with the test."""
        assert self._caller_loop is not None
        future = asyncio.run_coroutine_threadsafe(
            self._script_task(messages, tools), self._caller_loop
        )
        return await asyncio.wrap_future(future)

    async def _script_task(self, messages: list[Message], tools: list[dict[str, Any]]) -> Reply:
        task = asyncio.current_task()
        assert task is not None
        self._pending.add(task)
        try:
            result = self.script(messages, tools)
            return await result if inspect.isawaitable(result) else result
        finally:
            self._pending.discard(task)

    # -- OpenAI ---------------------------------------------------------------------------

    async def _openai_chat(self, request: Request) -> Response:
        body, outcome = await self._answer(request, ollama=False)
        if isinstance(outcome, _Failure):
            return _failure_response(outcome, ollama=False)
        model = str(body.get("model", "scripted"))
        completion_id = f"chatcmpl-{len(self.requests)}"
        if body.get("stream"):
            return StreamingResponse(
                _sse(_openai_chunks(outcome, model, completion_id)),
                media_type="text/event-stream",
            )
        message: dict[str, Any] = {"role": "assistant", "content": outcome.text or None}
        if outcome.calls:
            message["tool_calls"] = [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": name, "arguments": _text(args)},
                }
                for call_id, name, args in outcome.calls
            ]
        return JSONResponse(
            {
                "id": completion_id,
                "object": "chat.completion",
                "created": int(time.time()),
                "model": model,
                "choices": [
                    {"index": 0, "message": message, "finish_reason": outcome.finish_reason}
                ],
                "usage": _openai_usage(outcome),
            }
        )

    # -- Ollama ---------------------------------------------------------------------------

    async def _ollama_chat(self, request: Request) -> Response:
        body, outcome = await self._answer(request, ollama=True)
        if isinstance(outcome, _Failure):
            return _failure_response(outcome, ollama=True)
        model = str(body.get("model", "scripted"))
        # Ollama streams unless told not to.
        if body.get("stream", True):
            return StreamingResponse(
                _ndjson(_ollama_chunks(outcome, model)), media_type="application/x-ndjson"
            )
        message: dict[str, Any] = {"role": "assistant", "content": outcome.text}
        if outcome.calls:
            message["tool_calls"] = _ollama_calls(outcome)
        return JSONResponse(_ollama_done(outcome, model, message))


async def _ollama_show(request: Request) -> Response:
    """Enough of Ollama's model card for litellm to see a tool-capable model."""
    return JSONResponse(
        {
            "template": "{{ if .Tools }}tools{{ end }}{{ .Prompt }}",
            "capabilities": ["completion", "tools"],
            "model_info": {"general.context_length": 32768},
        }
    )


def _failure_response(failure: _Failure, *, ollama: bool) -> Response:
    headers = {} if failure.retry_after is None else {"Retry-After": f"{failure.retry_after:g}"}
    text = f"scripted failure: HTTP {failure.status}"
    content: dict[str, Any]
    if ollama:
        content = {"error": text}
    else:
        kind = _ERROR_TYPES.get(failure.status, "server_error")
        content = {"error": {"message": text, "type": kind, "param": None, "code": None}}
    return JSONResponse(content, status_code=failure.status, headers=headers)


def _from_ollama(message: Message) -> Message:
    """An Ollama message in OpenAI shape, so one script serves both protocols."""
    calls = message.get("tool_calls")
    if not calls:
        return message
    converted = dict(message)
    converted["tool_calls"] = [
        {
            "id": call.get("id", ""),
            "type": "function",
            "function": {
                "name": call["function"]["name"],
                "arguments": json.dumps(call["function"].get("arguments", {})),
            },
        }
        for call in calls
    ]
    return converted


def _text(arguments: dict[str, Any] | str) -> str:
    return arguments if isinstance(arguments, str) else json.dumps(arguments)


def _halves(text: str) -> list[str]:
    """Split text in two, so clients have to put streamed pieces back together."""
    if len(text) < 2:
        return [text] if text else []
    middle = len(text) // 2
    return [text[:middle], text[middle:]]


def _openai_usage(answer: _Answer) -> dict[str, int]:
    return {
        "prompt_tokens": answer.prompt_tokens,
        "completion_tokens": answer.completion_tokens,
        "total_tokens": answer.prompt_tokens + answer.completion_tokens,
    }


def _openai_chunks(answer: _Answer, model: str, completion_id: str) -> Iterator[dict[str, Any]]:
    created = int(time.time())

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }

    yield chunk({"role": "assistant", "content": ""})
    for piece in _halves(answer.text):
        yield chunk({"content": piece})
    for index, (call_id, name, args) in enumerate(answer.calls):
        head = {"index": index, "id": call_id, "type": "function"}
        yield chunk({"tool_calls": [{**head, "function": {"name": name, "arguments": ""}}]})
        for piece in _halves(_text(args)):
            yield chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
    yield chunk({}, answer.finish_reason)
    # As OpenAI does with stream_options.include_usage: a last chunk with no choices.
    yield {
        "id": completion_id,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "choices": [],
        "usage": _openai_usage(answer),
    }


async def _sse(chunks: Iterator[dict[str, Any]]) -> AsyncIterator[str]:
    for chunk in chunks:
        yield f"data: {json.dumps(chunk)}\n\n"
    yield "data: [DONE]\n\n"


def _ollama_calls(answer: _Answer) -> list[dict[str, Any]]:
    return [
        {"id": call_id, "function": {"index": index, "name": name, "arguments": args}}
        for index, (call_id, name, args) in enumerate(answer.calls)
    ]


def _now() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


def _ollama_done(answer: _Answer, model: str, message: dict[str, Any]) -> dict[str, Any]:
    return {
        "model": model,
        "created_at": _now(),
        "message": message,
        "done": True,
        "done_reason": "stop",
        "total_duration": 0,
        "prompt_eval_count": answer.prompt_tokens,
        "eval_count": answer.completion_tokens,
    }


def _ollama_chunks(answer: _Answer, model: str) -> Iterator[dict[str, Any]]:
    message: dict[str, Any]
    for piece in _halves(answer.text):
        message = {"role": "assistant", "content": piece}
        yield {"model": model, "created_at": _now(), "message": message, "done": False}
    if answer.calls:
        message = {"role": "assistant", "content": "", "tool_calls": _ollama_calls(answer)}
        yield {"model": model, "created_at": _now(), "message": message, "done": False}
    yield _ollama_done(answer, model, {"role": "assistant", "content": ""})


async def _ndjson(chunks: Iterator[dict[str, Any]]) -> AsyncIterator[str]:
    for chunk in chunks:
        yield json.dumps(chunk) + "\n"
