"""An AG-UI run interrupted, decided in the inbox, and resumed: the agent is a peer emitting
the `ag-ui-protocol` package's events over SSE (tests/peers/agui_agent.py), Pizza Bot is a real
`pizzabot serve`, and a person decides through the API."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import pytest_asyncio
import yaml
from ag_ui.core import RunAgentInput, UserMessage

from pizzabot.client import AsyncInbox
from pizzabot.client.agui import AgUiError, run
from tests.peers.agui_agent import ARGS, AgUiPeer
from tests.peers.server import ServerProcess

pytestmark = pytest.mark.asyncio(loop_scope="module")

SKILL = {"name": "approvals", "description": "AG-UI interrupts", "tools": {}}


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def server(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[ServerProcess]:
    root = tmp_path_factory.mktemp("agui")
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


async def card(server: ServerProcess, title: str) -> dict[str, Any]:
    async def pending(c: httpx.AsyncClient) -> dict[str, Any] | None:
        items = (await c.get("/api/inbox", params={"box": "action"})).json()["items"]
        found = [i for i in items if i["title"] == title and i["status"] == "pending"]
        return found[0] if found else None

    found: dict[str, Any] = await server.wait_for(pending, what=f"the card {title!r}")
    return found


async def decide(server: ServerProcess, item: dict[str, Any], **body: Any) -> None:
    async with server.client() as c:
        r = await c.post(f"/api/items/{item['id']}/decision", json=body)
    assert r.status_code == 200, r.text


def first_input(thread: str) -> RunAgentInput:
    return RunAgentInput(
        thread_id=thread,
        run_id=f"{thread}-run-1",
        messages=[UserMessage(id="u1", role="user", content="Send Ann the report")],
    )


async def test_an_interrupted_run_resumes_with_the_edit_and_the_answer(
    server: ServerProcess,
) -> None:
    token = await ask_token(server, "agui-edit")
    async with AgUiPeer() as peer, AsyncInbox(server.url, token) as inbox:
        running = asyncio.create_task(run(inbox, "approvals", peer.url, first_input("t1")))
        mail = await card(server, "Send the report to Ann?")
        assert (mail["tool"], mail["args"]) == ("send_email", ARGS)
        subject = await card(server, "Which subject line?")
        await decide(server, mail, decision="edit", args={**ARGS, "to": "bob@example.com"})
        await decide(server, subject, decision="edit", args={"answer": "Q3 report"})
        finished = await asyncio.wait_for(running, 60)

    assert finished.event.result == {"said": "sent to bob@example.com: Q3 report"}
    resumed = peer.inputs[1]
    assert resumed.thread_id == "t1" and resumed.run_id != "t1-run-1"
    assert resumed.messages == peer.inputs[0].messages
    entries = {e.interrupt_id: e for e in resumed.resume or []}
    assert entries["approve-mail"].status == "resolved"
    assert entries["approve-mail"].payload == {
        "approved": True,
        "args": {**ARGS, "to": "bob@example.com"},
    }
    assert (entries["subject"].status, entries["subject"].payload) == ("resolved", "Q3 report")


async def test_a_rejection_reaches_the_agent_with_its_reason_and_a_declined_question_is_cancelled(
    server: ServerProcess,
) -> None:
    token = await ask_token(server, "agui-reject")
    async with AgUiPeer() as peer, AsyncInbox(server.url, token) as inbox:
        running = asyncio.create_task(run(inbox, "approvals", peer.url, first_input("t2")))
        mail = await card(server, "Send the report to Ann?")
        subject = await card(server, "Which subject line?")
        await decide(server, mail, decision="reject", reason="Ann is on leave")
        await decide(server, subject, decision="reject", reason="no subject")
        finished = await asyncio.wait_for(running, 60)

    assert finished.event.result == {"said": "not sent (Ann is on leave)"}
    entries = {e.interrupt_id: e for e in peer.inputs[1].resume or []}
    assert entries["approve-mail"].payload == {"approved": False, "reason": "Ann is on leave"}
    assert entries["subject"].status == "cancelled"


async def test_an_event_over_the_limit_ends_the_run_with_an_error(server: ServerProcess) -> None:
    token = await ask_token(server, "agui-limit")
    async with AgUiPeer() as peer, AsyncInbox(server.url, token) as inbox:
        with pytest.raises(AgUiError, match="over 64 bytes"):
            await run(inbox, "approvals", peer.url, first_input("t3"), max_event_bytes=64)
