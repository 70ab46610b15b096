"""Previews sent by agents, end to end: a real `pizzabot serve` process and an inbox-only
skill. An agent asking through the API, the MCP tool `request_approval` or `pizzabot ask
--preview @FILE` sends its own text of what the call would do; the card shows it cleaned,
capped and marked as that agent's word, the card's digest covers it, the same
Idempotency-Key with another preview is another request, and an edit drops it."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio
import yaml
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from pizzabot.agent.card_digest import card_digest
from pizzabot.agent.model import PREVIEW_LABEL, Box, Item, ItemKind, ItemStatus, Preview, Risk
from pizzabot.agent.preview import FROM_THE_AGENT, PREVIEW_CAP
from tests.peers.server import TOKEN, ServerProcess

pytestmark = pytest.mark.asyncio(loop_scope="module")

SKILL = {
    "name": "deploys",
    "description": "approvals asked by the deploy agent",
    "tools": {
        "deploy.prod": {"policy": "ask"},
        "deploy.db": {"policy": "ask", "approvals": {"required": 2}},
    },
}
PLAN = "~ service web: image 1.2.2 -> 1.2.3\n~ replicas: 3 -> 4\nPlan: 0 to add, 2 to change."
AGENT = f"token:deploy-agent ({FROM_THE_AGENT})"


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def server(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[ServerProcess]:
    root = tmp_path_factory.mktemp("request-previews")
    skills = root / "skills"
    skills.mkdir()
    (skills / "deploys.yaml").write_text(yaml.safe_dump(SKILL))
    proc = ServerProcess(
        data_dir=root / "data", skills_dir=skills, env={"PIZZABOT_MCP_SKILL": "deploys"}
    )
    await proc.start()
    try:
        yield proc
    finally:
        proc.stop()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def agent(server: ServerProcess) -> str:
    """The deploy agent's token: it may ask, not decide."""
    async with server.client() as c:
        r = await c.post("/api/tokens", json={"name": "deploy-agent", "scope": "ask"})
    assert r.status_code == 201, r.text
    return str(r.json()["token"])


def deploy(title: str, tool: str = "deploy.prod", **more: Any) -> dict[str, Any]:
    args = {"env": "prod", "version": "1.2.3"}
    return {"skill": "deploys", "title": title, "tool": tool, "args": args, **more}


async def post(
    server: ServerProcess, token: str, body: dict[str, Any], *, key: str | None = None
) -> httpx.Response:
    headers = {"Idempotency-Key": key} if key else {}
    async with server.client(token) as c:
        return await c.post("/api/requests", json=body, headers=headers)


async def item_of(server: ServerProcess, item_id: str) -> dict[str, Any]:
    async with server.client() as c:
        r = await c.get(f"/api/items/{item_id}")
    assert r.status_code == 200, r.text
    data: dict[str, Any] = r.json()
    return data


async def filed(server: ServerProcess, token: str, body: dict[str, Any]) -> dict[str, Any]:
    r = await post(server, token, body)
    assert r.status_code == 201, r.text
    return await item_of(server, r.json()["item_id"])


async def web_page(server: ServerProcess, item_id: str) -> str:
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as web:
        assert (await web.get("/login", params={"token": TOKEN})).status_code == 303
        return (await web.get(f"/items/{item_id}")).text


def digest_with(item: dict[str, Any], preview: Preview | None) -> str:
    """The digest of the card the API describes, showing `preview` (None: no preview)."""
    card = Item(
        id=item["id"],
        run_id=item["run_id"],
        skill=item["skill"],
        box=Box.ACTION,
        kind=ItemKind.TOOL,
        status=ItemStatus.PENDING,
        title=item["title"],
        body=item["body"],
        created_at=datetime.now(UTC),
        tool=item["tool"],
        args=item["args"],
        version=item["version"],
        requested_by=item["requested_by"],
        risk=Risk(rule=item["risk"].get("rule"), preview=preview),
    )
    return card_digest(card)


async def test_an_agents_preview_shows_on_the_card_as_its_own_word(
    server: ServerProcess, agent: str
) -> None:
    sent = f"{PLAN}\r\n\x1b[31mdone\x1b[0m\u202e <b>ok</b>\x00"
    item = await filed(server, agent, deploy("Deploy web 1.2.3", preview=sent))
    shown = f"{PLAN}\n[31mdone[0m <b>ok</b>"
    assert item["risk"]["preview"] == {"text": shown, "by": AGENT, "failed": False}
    assert item["requested_by"] == "token:deploy-agent"

    page = await web_page(server, item["id"])
    assert PREVIEW_LABEL in page and FROM_THE_AGENT in page and "token:deploy-agent" in page
    assert "Plan: 0 to add, 2 to change." in page
    assert "&lt;b&gt;ok&lt;/b&gt;" in page and "<b>ok</b>" not in page

    # The digest covers the preview: an approval made on a card without it does not count.
    assert item["digest"] == digest_with(item, Preview(shown, AGENT))
    bare = digest_with(item, None)
    assert bare != item["digest"]
    async with server.client() as c:
        url = f"/api/items/{item['id']}/decision"
        r = await c.post(url, json={"decision": "approve", "seen": bare})
        assert r.status_code == 409, r.text
        r = await c.post(url, json={"decision": "approve", "seen": item["digest"]})
        assert r.status_code == 200, r.text


async def test_a_long_preview_is_cut_and_one_too_long_is_refused(
    server: ServerProcess, agent: str
) -> None:
    item = await filed(server, agent, deploy("Deploy with a long plan", preview="y" * 20_000))
    text = item["risk"]["preview"]["text"]
    assert text == "y" * PREVIEW_CAP + f"\n… [cut: {20_000 - PREVIEW_CAP} more characters]"

    r = await post(server, agent, deploy("Deploy with a huge plan", preview="y" * 20_001))
    assert r.status_code == 422 and "preview" in r.text
    question = {"skill": "deploys", "title": "Which day?", "question": "Which day?"}
    r = await post(server, agent, {**question, "preview": PLAN})
    assert r.status_code == 422 and "a question has no call to preview" in r.text


async def test_the_same_key_with_another_preview_is_another_request(
    server: ServerProcess, agent: str
) -> None:
    body = deploy("Deploy once", preview=PLAN)
    first = await post(server, agent, body, key="deploy-once")
    again = await post(server, agent, body, key="deploy-once")
    assert (first.status_code, again.status_code) == (201, 200)
    assert again.json()["id"] == first.json()["id"]
    other = await post(
        server, agent, {**body, "preview": PLAN + "\n(and a migration)"}, key="deploy-once"
    )
    assert other.status_code == 409, other.text
    none = await post(server, agent, deploy("Deploy once"), key="deploy-once")
    assert none.status_code == 409, none.text


async def test_an_edit_drops_the_agents_preview(server: ServerProcess, agent: str) -> None:
    item = await filed(server, agent, deploy("Migrate the db", tool="deploy.db", preview=PLAN))
    assert item["risk"]["preview"]["by"] == AGENT
    edited = {"env": "prod", "version": "1.2.4"}
    async with server.client() as c:
        r = await c.post(
            f"/api/items/{item['id']}/decision",
            json={"decision": "edit", "args": edited, "seen": item["digest"]},
        )
    assert r.status_code == 200, r.text
    after = await item_of(server, item["id"])
    # On the way to two approvals with other arguments: the agent's text showed the old ones.
    assert after["status"] == "pending" and after["args"] == edited
    assert "preview" not in after["risk"] and after["digest"] != item["digest"]
    assert "Plan: 0 to add" not in await web_page(server, item["id"])


@contextlib.asynccontextmanager
async def mcp_session(server: ServerProcess, token: str) -> AsyncIterator[ClientSession]:
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        create_mcp_http_client(headers=headers) as http,
        streamable_http_client(f"{server.url}/mcp", http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


async def pending(server: ServerProcess, title: str) -> dict[str, Any]:
    async def find(c: httpx.AsyncClient) -> dict[str, Any] | None:
        items = (await c.get("/api/inbox", params={"box": "action"})).json()["items"]
        return next((i for i in items if i["title"] == title), None)

    found: dict[str, Any] = await server.wait_for(find, what=f"the item {title!r} in Action")
    return found


async def test_request_approval_over_mcp_carries_a_preview(
    server: ServerProcess, agent: str
) -> None:
    async with mcp_session(server, agent) as session:
        ask = {"title": "Deploy over MCP", "tool": "deploy.prod", "args": {"env": "prod"}}
        call = asyncio.create_task(session.call_tool("request_approval", {**ask, "preview": PLAN}))
        item = await pending(server, "Deploy over MCP")
        assert item["risk"]["preview"] == {"text": PLAN, "by": AGENT, "failed": False}
        async with server.client() as c:
            r = await c.post(f"/api/items/{item['id']}/decision", json={"decision": "approve"})
        assert r.status_code == 200, r.text
        result = await asyncio.wait_for(call, 60)
    assert (result.structured_content or {})["status"] == "approved"


async def test_pizzabot_ask_sends_a_preview_from_a_file(
    server: ServerProcess, agent: str, tmp_path: Path
) -> None:
    plan = tmp_path / "plan.txt"
    plan.write_text(PLAN + "\n")
    bin_dir = str(Path(sys.executable).parent)  # where `pizzabot` is installed
    env = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        "PIZZABOT_URL": server.url,
        "PIZZABOT_AGENT_TOKEN": agent,
        "PIZZABOT_DATA_DIR": str(tmp_path / "elsewhere"),
    }
    argv = ["pizzabot", "ask", "deploys", "--tool", "deploy.prod", "--args", '{"env": "prod"}']
    argv += ["--title", "Deploy from a shell", "--preview", f"@{plan}"]
    proc = await asyncio.create_subprocess_exec(
        *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 3, err.decode()  # filed, still pending
    item = await item_of(server, json.loads(out)["item_id"])
    assert item["risk"]["preview"] == {"text": PLAN, "by": AGENT, "failed": False}

    missing = await asyncio.create_subprocess_exec(
        *argv[:-1], f"@{tmp_path / 'nope.txt'}", stderr=asyncio.subprocess.PIPE, env=env
    )
    _, err = await asyncio.wait_for(missing.communicate(), 60)
    assert (
        missing.returncode == 2
        and f"cannot read --preview @{tmp_path / 'nope.txt'}" in err.decode()
    )
