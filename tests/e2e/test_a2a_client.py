"""A remote A2A agent's questions become question cards, and their answers go back on the same
task: the agent is built with the `a2a` SDK's server side (tests/peers/a2a_agent.py), Pizza Bot
is a real `pizzabot serve`, and a person answers through the API — first from the client
module, then from `pizzabot a2a watch` as a user runs it."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import pytest_asyncio
import yaml
from a2a.types import TaskState

from pizzabot.client import AsyncInbox
from pizzabot.client.a2a import ResponseTooLarge, capped_http, connect, follow, start
from tests.peers.a2a_agent import A2aPeer
from tests.peers.server import TOKEN, ServerProcess

pytestmark = pytest.mark.asyncio(loop_scope="module")

SKILL = {"name": "approvals", "description": "questions of remote agents", "tools": {}}


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def server(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[ServerProcess]:
    root = tmp_path_factory.mktemp("a2a-client")
    skills = root / "skills"
    skills.mkdir()
    (skills / "approvals.yaml").write_text(yaml.safe_dump(SKILL))
    proc = ServerProcess(data_dir=root / "data", skills_dir=skills)
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


async def answer_next(server: ServerProcess, title_part: str, answer: str) -> dict[str, Any]:
    """A person answers the question card whose title says `title_part`."""

    async def card(c: httpx.AsyncClient) -> dict[str, Any] | None:
        items = (await c.get("/api/inbox", params={"box": "action"})).json()["items"]
        found = [i for i in items if title_part in i["title"] and i["status"] == "pending"]
        return found[0] if found else None

    item: dict[str, Any] = await server.wait_for(card, what=f"a card saying {title_part!r}")
    async with server.client() as c:
        r = await c.post(
            f"/api/items/{item['id']}/decision",
            json={"decision": "edit", "args": {"answer": answer}},
        )
    assert r.status_code == 200, r.text
    return item


async def test_each_question_of_the_remote_task_is_a_card_whose_answer_resumes_it(
    server: ServerProcess,
) -> None:
    token = await ask_token(server, "watcher")
    async with A2aPeer() as peer, capped_http() as http, AsyncInbox(server.url, token) as inbox:
        client, _ = await connect(peer.url, http)
        task = await start(client, "deploy 1.2", message_id="first")
        assert task.status.state != 0
        following = asyncio.create_task(follow(inbox, "approvals", client, task, agent="Deployer"))

        asked = await answer_next(server, "Which environment", "prod")
        assert asked["title"].startswith("Deployer: Which environment")
        await answer_next(server, "deploy code", "XJ-42")
        done = await asyncio.wait_for(following, 30)

    assert done.id == task.id
    assert done.artifacts[0].parts[0].text == "deployed to prod"
    # Both answers went back on the same task and context, as text.
    answers = peer.agent.received[1:]
    assert [m.parts[0].text for m in answers] == ["prod", "XJ-42"]
    assert {(m.task_id, m.context_id) for m in answers} == {(task.id, task.context_id)}


async def test_a_remote_agent_that_sends_too_much_is_refused() -> None:
    async with A2aPeer() as peer, capped_http(max_bytes=200) as http:
        with pytest.raises(ResponseTooLarge):
            await connect(peer.url, http)


async def test_pizzabot_a2a_watch_answers_from_the_inbox_and_prints_the_ended_task(
    server: ServerProcess,
) -> None:
    async with A2aPeer() as peer:
        env = {**os.environ, "PIZZABOT_URL": server.url, "PIZZABOT_API_TOKEN": TOKEN}
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "pizzabot.bot.main",
            "a2a",
            "watch",
            peer.url,
            "--say",
            "deploy 1.3",
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        await answer_next(server, "Which environment", "staging")
        await answer_next(server, "deploy code", "AB-1")
        out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    task = json.loads(out)
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert task["artifacts"][0]["parts"][0]["text"] == "deployed to staging"


async def test_a_declined_question_cancels_the_remote_task(server: ServerProcess) -> None:
    token = await ask_token(server, "decliner")
    async with A2aPeer() as peer, capped_http() as http, AsyncInbox(server.url, token) as inbox:
        client, _ = await connect(peer.url, http)
        task = await start(client, "deploy 1.4", message_id="declined")
        following = asyncio.create_task(follow(inbox, "approvals", client, task, agent="Deployer"))

        async def card(c: httpx.AsyncClient) -> dict[str, Any] | None:
            items = (await c.get("/api/inbox", params={"box": "action"})).json()["items"]
            found = [i for i in items if i["run_id"] and "Which environment" in i["title"]]
            return next((i for i in found if i["status"] == "pending"), None)

        item = await server.wait_for(card, what="the question card")
        async with server.client() as c:
            r = await c.post(
                f"/api/items/{item['id']}/decision", json={"decision": "reject", "reason": "no"}
            )
        assert r.status_code == 200, r.text
        done = await asyncio.wait_for(following, 30)
    assert (done.id, done.status.state) == (task.id, TaskState.TASK_STATE_CANCELED)
    assert len(peer.agent.received) == 1  # nothing was answered on the task
