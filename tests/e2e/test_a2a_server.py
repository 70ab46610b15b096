"""A person as an A2A agent, end to end: a real `pizzabot serve` with A2A on, and the `a2a`
SDK's own client, as another agent would use it — the card, a message that becomes a card,
the task in input-required until a person decides, then completed with the decision."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import pytest_asyncio
import yaml
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.types import (
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    SubscribeToTaskRequest,
    Task,
    TaskNotFoundError,
    TaskState,
)
from google.protobuf.json_format import MessageToDict
from google.protobuf.struct_pb2 import Value

from tests.peers.raw_http import exchange
from tests.peers.server import ServerProcess

pytestmark = pytest.mark.asyncio(loop_scope="module")

SKILL = {
    "name": "deploys",
    "description": "approvals asked by other agents over A2A",
    "tools": {
        "deploy.prod": {
            "policy": "ask",
            "rules": [{"when": {"env": "staging"}, "policy": "auto"}],
        },
        "ask_human": {"timeout": "1h"},
    },
}


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def server(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[ServerProcess]:
    root = tmp_path_factory.mktemp("a2a")
    skills = root / "skills"
    skills.mkdir()
    (skills / "deploys.yaml").write_text(yaml.safe_dump(SKILL))
    proc = ServerProcess(
        data_dir=root / "data", skills_dir=skills, env={"PIZZABOT_A2A_SKILL": "deploys"}
    )
    await proc.start()
    try:
        yield proc
    finally:
        proc.stop()


async def ask_token(server: ServerProcess, name: str) -> str:
    async with server.client() as c:
        r = await c.post("/api/tokens", json={"name": name, "scope": "ask"})
    assert r.status_code == 201, r.text
    secret: str = r.json()["token"]
    return secret


def data_part(value: dict[str, Any]) -> Part:
    v = Value()
    v.struct_value.update(value)
    return Part(data=v)


def message(*parts: Part, message_id: str, context_id: str = "") -> SendMessageRequest:
    return SendMessageRequest(
        message=Message(
            message_id=message_id, context_id=context_id, role=Role.ROLE_USER, parts=list(parts)
        )
    )


def decision(task: Task) -> dict[str, Any]:
    """The decision artifact's data, as the other agent reads it."""
    assert [a.name for a in task.artifacts] == ["decision"]
    found: dict[str, Any] = MessageToDict(task.artifacts[0].parts[0].data)
    return found


async def decide(server: ServerProcess, item_id: str, **body: Any) -> None:
    async with server.client() as c:
        r = await c.post(f"/api/items/{item_id}/decision", json=body)
    assert r.status_code == 200, r.text


class Agent:
    """Another agent: the SDK's client, holding an ask token."""

    def __init__(self, server: ServerProcess, token: str, *, streaming: bool = False) -> None:
        self.http = httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30)
        self.server = server
        self.streaming = streaming

    async def __aenter__(self) -> Any:
        card = await A2ACardResolver(self.http, self.server.url).get_agent_card()
        config = ClientConfig(httpx_client=self.http, streaming=self.streaming)
        self.client = ClientFactory(config).create(card)
        return self.client

    async def __aexit__(self, *exc: object) -> None:
        await self.http.aclose()


async def send(client: Any, request: SendMessageRequest) -> Task:
    tasks = [r.task async for r in client.send_message(request) if r.HasField("task")]
    assert tasks, "the agent answered no task"
    return tasks[-1]


async def test_the_card_is_public_and_says_a_token_is_needed(server: ServerProcess) -> None:
    async with httpx.AsyncClient() as c:
        card = (await c.get(f"{server.url}/.well-known/agent-card.json")).json()
        unauthenticated = await c.post(f"{server.url}/a2a", json={"jsonrpc": "2.0"})
    assert card["supportedInterfaces"][0]["url"] == f"{server.url}/a2a"
    assert card["securitySchemes"]["bearer"]["httpAuthSecurityScheme"]["scheme"] == "bearer"
    assert [s["id"] for s in card["skills"]] == ["deploys"]
    assert unauthenticated.status_code == 401


async def test_a_message_waits_in_input_required_then_completes_with_the_approval(
    server: ServerProcess,
) -> None:
    token = await ask_token(server, "deploy-agent")
    async with Agent(server, token) as client:
        asked = data_part({"tool": "deploy.prod", "args": {"env": "prod", "replicas": 3}})
        task = await send(
            client, message(asked, Part(text="Ship 1.2"), message_id="m1", context_id="c1")
        )
        assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        assert task.context_id == "c1"
        waiting = task.status.message.parts[0].text
        assert waiting.startswith("Waiting for a person to decide in Pizza Bot")
        item_id = MessageToDict(task.status.message.parts[1].data)["item_id"]

        # The same message again is the same task, not a second card.
        again = await send(
            client, message(asked, Part(text="Ship 1.2"), message_id="m1", context_id="c1")
        )
        assert again.id == task.id

        await decide(server, item_id, decision="edit", args={"env": "prod", "replicas": 2})
        done = await client.get_task(GetTaskRequest(id=task.id))
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    assert done.context_id == "c1"
    got = decision(done)
    assert got["status"] == "edited"
    assert got["args"] == {"env": "prod", "replicas": 2}
    assert got["requested_by"] == "token:deploy-agent"


async def test_a_subscriber_sees_the_rejection_and_its_reason(server: ServerProcess) -> None:
    token = await ask_token(server, "sub-agent")
    async with Agent(server, token, streaming=True) as client:
        asked = data_part({"tool": "deploy.prod", "args": {"env": "prod"}})
        task = await send(client, message(asked, message_id="m2"))
        assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        item_id = MessageToDict(task.status.message.parts[1].data)["item_id"]

        seen: list[Any] = []

        async def follow() -> None:
            async for event in client.subscribe(SubscribeToTaskRequest(id=task.id)):
                seen.append(event)

        following = asyncio.create_task(follow())
        await asyncio.sleep(0.5)  # the subscriber is waiting on the decision
        await decide(server, item_id, decision="reject", reason="not on a Friday")
        await asyncio.wait_for(following, 30)
    last = seen[-1]
    assert last.status_update.status.state == TaskState.TASK_STATE_COMPLETED
    artifact = next(e.artifact_update.artifact for e in seen if e.HasField("artifact_update"))
    got = MessageToDict(artifact.parts[0].data)
    assert (got["status"], got["reason"]) == ("rejected", "not on a Friday")


async def test_a_rule_decides_at_once_and_a_question_is_answered(server: ServerProcess) -> None:
    token = await ask_token(server, "q-agent")
    async with Agent(server, token) as client:
        staging = data_part({"tool": "deploy.prod", "args": {"env": "staging"}})
        task = await send(client, message(staging, message_id="m3"))
        assert task.status.state == TaskState.TASK_STATE_COMPLETED
        assert decision(task)["status"] == "approved"

        q = await send(client, message(Part(text="Which region first?"), message_id="m4"))
        assert q.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        item_id = MessageToDict(q.status.message.parts[1].data)["item_id"]
        await decide(server, item_id, decision="edit", args={"answer": "eu-west"})
        answered = await client.get_task(GetTaskRequest(id=q.id))
    assert decision(answered)["status"] == "answered"
    assert decision(answered)["args"] == {"answer": "eu-west"}


async def test_an_ask_token_reads_only_its_own_tasks(server: ServerProcess) -> None:
    mine, other = await ask_token(server, "mine"), await ask_token(server, "other")
    async with Agent(server, mine) as client:
        task = await send(client, message(Part(text="May I?"), message_id="m5"))
    async with Agent(server, other) as client:
        with pytest.raises(TaskNotFoundError):
            await client.get_task(GetTaskRequest(id=task.id))


async def test_a_large_body_is_refused_unread_with_a_token_and_without(
    server: ServerProcess,
) -> None:
    token = await ask_token(server, "big-agent")
    head = "POST /a2a HTTP/1.1\nHost: x\nContent-Type: application/json\n"
    length = f"Content-Length: {90 * 1024 * 1024}\n"
    status, _ = await exchange(server.port, head + length, b'{"jsonrpc": "')
    assert status == 401
    status, raw = await exchange(
        server.port, head + f"Authorization: Bearer {token}\n" + length, b'{"jsonrpc": "'
    )
    assert status == 413 and b"larger than" in raw


async def test_an_agent_speaking_a2a_0_3_asks_with_message_send_and_reads_tasks_get(
    server: ServerProcess,
) -> None:
    token = await ask_token(server, "old-agent")
    said = {"kind": "text", "text": "Restart the queue?"}
    send = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "message/send",
        "params": {
            "message": {"kind": "message", "messageId": "old-1", "role": "user", "parts": [said]}
        },
    }
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as c:
        task = (await c.post(f"{server.url}/a2a", json=send)).json()["result"]
        assert task["status"]["state"] == "input-required"
        item_id = task["status"]["message"]["parts"][1]["data"]["item_id"]
        await decide(server, item_id, decision="edit", args={"answer": "yes"})
        get = {"jsonrpc": "2.0", "id": 2, "method": "tasks/get", "params": {"id": task["id"]}}
        done = (await c.post(f"{server.url}/a2a", json=get)).json()["result"]
    assert done["status"]["state"] == "completed"
    assert done["artifacts"][0]["parts"][0]["data"]["args"] == {"answer": "yes"}
