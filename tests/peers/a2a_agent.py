"""A remote A2A agent on loopback, built with the `a2a` SDK's own server side: a deploy agent
that asks its user which environment (input-required), then for a deploy code
(auth-required), then completes — recording every message it was sent."""

from __future__ import annotations

import asyncio
import socket
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from a2a.helpers.proto_helpers import get_message_text, new_task_from_user_message
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events.event_queue import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    Message,
    Part,
)
from starlette.applications import Starlette


@dataclass
class DeployAgent(AgentExecutor):
    """Asks twice, then deploys; `received` holds every message, as sent."""

    received: list[Message] = field(default_factory=list)
    rounds: dict[str, int] = field(default_factory=dict)
    environment: str = ""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.message is not None
        self.received.append(context.message)
        task = context.current_task
        if task is None:
            task = new_task_from_user_message(context.message)
            await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        said = get_message_text(context.message)
        rounds = self.rounds.get(task.id, 0)
        self.rounds[task.id] = rounds + 1
        if rounds == 0:
            ask = updater.new_agent_message([Part(text="Which environment, staging or prod?")])
            await updater.requires_input(ask)
        elif rounds == 1:
            self.environment = said
            ask = updater.new_agent_message([Part(text=f"Paste the deploy code for {said}.")])
            await updater.requires_auth(ask)
        else:
            await updater.add_artifact(
                [Part(text=f"deployed to {self.environment}")], name="result"
            )
            await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.task_id is not None and context.context_id is not None
        await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()


class A2aPeer:
    """The agent served over JSON-RPC on a free loopback port."""

    def __init__(self) -> None:
        self.agent = DeployAgent()
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self.port = self._sock.getsockname()[1]
        card = AgentCard(
            name="Deployer",
            description="Deploys, after asking",
            version="1.0.0",
            supported_interfaces=[
                AgentInterface(url=self.url, protocol_binding="JSONRPC", protocol_version="1.0")
            ],
            capabilities=AgentCapabilities(streaming=False),
            default_input_modes=["text/plain"],
            default_output_modes=["text/plain"],
            skills=[AgentSkill(id="deploy", name="deploy", description="deploys", tags=["x"])],
        )
        handler = DefaultRequestHandler(self.agent, InMemoryTaskStore(), card)
        app = Starlette(
            routes=[*create_agent_card_routes(card), *create_jsonrpc_routes(handler, "/")]
        )
        self._server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
        self._task: asyncio.Task[None] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def __aenter__(self) -> A2aPeer:
        self._task = asyncio.create_task(self._server.serve(sockets=[self._sock]))
        while not self._server.started:
            await asyncio.sleep(0.01)
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self._server.should_exit = True
        if self._task is not None:
            await self._task
