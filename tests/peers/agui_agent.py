"""An AG-UI agent on loopback, emitting the `ag-ui-protocol` package's own events over SSE: a
mail agent whose first run streams a `send_email` tool call and ends interrupted (an approval
of that call, and a question for the subject); the resuming run reads the resume entries and
finishes with what it did. Every input it was sent is recorded."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator
from typing import Any

import uvicorn
from ag_ui.core import (
    Interrupt,
    RunAgentInput,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunFinishedSuccessOutcome,
    RunStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
)
from ag_ui.encoder import EventEncoder
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route

ARGS = {"to": "ann@example.com", "body": "The report is ready."}


class AgUiPeer:
    def __init__(self) -> None:
        self.inputs: list[RunAgentInput] = []
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self.port = self._sock.getsockname()[1]
        app = Starlette(routes=[Route("/run", self._run, methods=["POST"])])
        self._server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
        self._task: asyncio.Task[None] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/run"

    async def _run(self, request: Request) -> StreamingResponse:
        body = RunAgentInput.model_validate(await request.json())
        self.inputs.append(body)
        encoder = EventEncoder(accept=request.headers.get("accept"))

        async def stream() -> AsyncIterator[str]:
            for event in self._events(body):
                yield encoder.encode(event)

        return StreamingResponse(stream(), media_type=encoder.get_content_type())

    def _events(self, body: RunAgentInput) -> list[Any]:
        started = RunStartedEvent(thread_id=body.thread_id, run_id=body.run_id)
        if not body.resume:
            return [
                started,
                ToolCallStartEvent(tool_call_id="call-1", tool_call_name="send_email"),
                ToolCallArgsEvent(tool_call_id="call-1", delta=json.dumps(ARGS)[:20]),
                ToolCallArgsEvent(tool_call_id="call-1", delta=json.dumps(ARGS)[20:]),
                ToolCallEndEvent(tool_call_id="call-1"),
                RunFinishedEvent(
                    thread_id=body.thread_id,
                    run_id=body.run_id,
                    outcome=RunFinishedInterruptOutcome(
                        interrupts=[
                            Interrupt(
                                id="approve-mail",
                                reason="tool_approval",
                                tool_call_id="call-1",
                                message="Send the report to Ann?",
                            ),
                            Interrupt(id="subject", reason="input", message="Which subject line?"),
                        ]
                    ),
                ),
            ]
        got = {entry.interrupt_id: entry for entry in body.resume}
        mail, subject = got["approve-mail"], got["subject"]
        if mail.status == "resolved" and mail.payload["approved"]:
            said = f"sent to {mail.payload['args']['to']}: {subject.payload}"
        else:
            reason = mail.payload["reason"] if mail.status == "resolved" else "no answer"
            said = f"not sent ({reason})"
        return [
            started,
            TextMessageStartEvent(message_id="m1", role="assistant"),
            TextMessageContentEvent(message_id="m1", delta=said),
            TextMessageEndEvent(message_id="m1"),
            RunFinishedEvent(
                thread_id=body.thread_id,
                run_id=body.run_id,
                outcome=RunFinishedSuccessOutcome(),
                result={"said": said},
            ),
        ]

    async def __aenter__(self) -> AgUiPeer:
        self._task = asyncio.create_task(self._server.serve(sockets=[self._sock]))
        while not self._server.started:
            await asyncio.sleep(0.01)
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self._server.should_exit = True
        if self._task is not None:
            await self._task
