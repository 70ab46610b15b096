"""The adapters' corners with the real frameworks in this process, a real server, and the
scripted model: LangGraph's per-call interrupts and a review config that allows no edit, the
OpenAI Agents SDK's missing edit, pydantic-ai's edited arguments and stable keys, and the
client's long poll answering two waiters with one decision."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
import yaml
from agents import Agent, OpenAIChatCompletionsModel, Runner, function_tool, set_tracing_disabled
from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command
from openai import AsyncOpenAI
from pydantic_ai import Agent as PydanticAgent
from pydantic_ai import DeferredToolRequests
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from pizzabot.agent.testing.model_server import ScriptedModelServer
from pizzabot.agent.testing.scripts import Reply, ToolCall, count_role, last_tool_result
from pizzabot.client import AsyncInbox, Inbox, RequestState
from pizzabot.client.langgraph import decide_interrupts, hitl_decision
from pizzabot.client.openai_agents import decide_interruptions
from pizzabot.client.pydantic_ai import decide_deferred
from tests.peers.server import TOKEN, ServerProcess
from tests.waiting import eventually

pytestmark = pytest.mark.asyncio(loop_scope="module")

SKILL = {"name": "agents", "description": "framework tests", "tools": {"*": {"policy": "ask"}}}
ANN = {"to": "ann@example.com", "subject": "Quote"}
BOB = {"to": "bob@example.com", "subject": "Quote"}


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def server(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[ServerProcess]:
    root = tmp_path_factory.mktemp("frameworks")
    skills = root / "skills"
    skills.mkdir()
    (skills / "agents.yaml").write_text(yaml.safe_dump(SKILL))
    proc = ServerProcess(data_dir=root / "data", skills_dir=skills)
    await proc.start()
    try:
        yield proc
    finally:
        proc.stop()


def mail_both(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Reply:
    """Two calls in one turn, then the tools' last word."""
    if count_role(messages, "tool") == 0:
        return Reply(tool_calls=[ToolCall("send_email", ANN), ToolCall("send_email", BOB)])
    return Reply(text=f"Done: {last_tool_result(messages)}")


def mail_ann(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Reply:
    if count_role(messages, "tool") == 0:
        return Reply(tool_calls=[ToolCall("send_email", ANN)])
    return Reply(text=f"Done: {last_tool_result(messages)}")


async def pending(server: ServerProcess, count: int) -> list[dict[str, Any]]:
    """The pending Action items once there are `count` of them (oldest first)."""
    async with server.client() as c:

        async def found() -> list[dict[str, Any]] | None:
            items = (await c.get("/api/inbox", params={"box": "action"})).json()["items"]
            mine = [i for i in items if i["status"] == "pending"]
            return sorted(mine, key=lambda i: i["created_at"]) if len(mine) >= count else None

        return await eventually(found, what=f"{count} pending items", context=server.log)


async def requests_made(server: ServerProcess) -> int:
    """How many requests the server has had (each is a run of the inbox-only skill)."""
    async with server.client() as c:
        runs = (await c.get("/api/runs", params={"limit": 1000})).json()["items"]
        return len([r for r in runs if r["skill"] == "agents"])


async def decide(server: ServerProcess, item_id: str, **body: Any) -> None:
    async with server.client() as c:
        r = await c.post(f"/api/items/{item_id}/decision", json=body)
        assert r.status_code == 200, r.text


async def decide_all_pending(server: ServerProcess) -> None:
    """Leave no item pending for the next story (a story that failed halfway)."""
    async with server.client() as c:
        items = (await c.get("/api/inbox", params={"box": "action"})).json()["items"]
    for item in items:
        if item["status"] == "pending":
            await decide(server, item["id"], decision="reject", reason="test cleanup")


@pytest_asyncio.fixture(loop_scope="module")
async def inbox(server: ServerProcess) -> AsyncIterator[AsyncInbox]:
    async with AsyncInbox(server.url, TOKEN) as client:
        yield client
    await decide_all_pending(server)


async def test_langgraph_per_call_without_edit_gets_the_new_arguments_as_a_reject(
    server: ServerProcess, inbox: AsyncInbox
) -> None:
    sent: list[dict[str, str]] = []

    @tool
    def send_email(to: str, subject: str) -> str:
        """Send an email."""
        sent.append({"to": to, "subject": subject})
        return f"sent to {to}"

    async with ScriptedModelServer(mail_both) as model:
        graph = create_agent(
            ChatOpenAI(base_url=model.openai_base, model="scripted", api_key="x"),
            tools=[send_email],
            middleware=[
                HumanInTheLoopMiddleware(
                    interrupt_on={"send_email": {"allowed_decisions": ["approve", "reject"]}},
                    interrupt_mode="per_call",
                )
            ],
            checkpointer=InMemorySaver(),
        )
        config: Any = {"configurable": {"thread_id": "per-call"}}
        result = await graph.ainvoke({"messages": [("user", "mail both")]}, config, version="v2")
        assert len(result.interrupts) == 2
        deciding = asyncio.create_task(decide_interrupts(inbox, "agents", result.interrupts))
        ann, bob = sorted(await pending(server, 2), key=lambda i: i["args"]["to"])
        await decide(server, ann["id"], decision="approve")
        await decide(server, bob["id"], decision="edit", args={**BOB, "to": "cy@example.com"})
        resume = await deciding
        by_to = {i.value["args"]["to"]: i.id for i in result.interrupts}
        assert resume[by_to["ann@example.com"]] == {"type": "approve"}
        assert resume[by_to["bob@example.com"]]["type"] == "reject"
        result = await graph.ainvoke(Command(resume=resume), config, version="v2")
        assert not result.interrupts
    assert sent == [ANN]  # no edit allowed: Bob's call did not run with Cy's address either
    messages = result.value["messages"]
    rejected = [m for m in messages if getattr(m, "status", None) == "error"]
    assert len(rejected) == 1 and "cy@example.com" in str(rejected[0].content)


async def test_hitl_decisions_stay_within_what_the_review_allows() -> None:
    def made(status: str, **kw: Any) -> RequestState:
        return RequestState(kind="approval", id="r", item_id="i", status=status, **kw)

    edited = made("edited", args={"to": "cy@example.com"})
    assert hitl_decision(edited, "send_email") == {
        "type": "edit",
        "edited_action": {"name": "send_email", "args": {"to": "cy@example.com"}},
    }
    expired = hitl_decision(made("expired"), "send_email", ["approve", "reject"])
    assert expired["type"] == "reject" and "in time" in expired["message"]
    with pytest.raises(ValueError, match="does not allow reject"):
        hitl_decision(made("rejected", reason="no"), "send_email", ["approve", "edit"])
    with pytest.raises(ValueError, match="allows no approve"):
        hitl_decision(made("approved"), "send_email", ["reject"])


async def test_openai_agents_edit_is_a_reject_that_carries_the_new_arguments(
    server: ServerProcess, inbox: AsyncInbox
) -> None:
    set_tracing_disabled(True)
    sent: list[str] = []

    def send_email(to: str, subject: str) -> str:
        """Send an email."""
        sent.append(to)
        return f"sent to {to}"

    async with ScriptedModelServer(mail_ann) as model:
        chat = OpenAIChatCompletionsModel(
            "scripted", AsyncOpenAI(base_url=model.openai_base, api_key="x")
        )
        tools = [function_tool(send_email, needs_approval=True)]
        agent = Agent(name="mailer", instructions="Mail.", model=chat, tools=tools)
        result = await Runner.run(agent, "mail Ann")
        assert len(result.interruptions) == 1
        deciding = asyncio.create_task(decide_interruptions(inbox, "agents", result))
        [item] = await pending(server, 1)
        await decide(server, item["id"], decision="edit", args={**ANN, "subject": "New quote"})
        state = await deciding
        result = await Runner.run(agent, state)
        last_input = model.requests[-1]["messages"]
    assert sent == []  # the SDK cannot run other arguments than the model's
    told = [m for m in last_input if m.get("role") == "tool"][-1]["content"]
    assert '"subject": "New quote"' in told and "Call the tool again" in told


async def test_pydantic_ai_runs_the_edited_call_and_a_key_prefix_finds_the_same_item(
    server: ServerProcess, inbox: AsyncInbox
) -> None:
    sent: list[dict[str, str]] = []
    async with ScriptedModelServer(mail_ann) as model:
        chat = OpenAIChatModel(
            "scripted", provider=OpenAIProvider(base_url=model.openai_base, api_key="x")
        )
        agent = PydanticAgent(chat, output_type=[str, DeferredToolRequests])

        @agent.tool_plain(requires_approval=True)
        def send_email(to: str, subject: str) -> str:
            """Send an email."""
            sent.append({"to": to, "subject": subject})
            return f"sent to {to}"

        before = await requests_made(server)
        result = await agent.run("mail Ann")
        requests = result.output
        assert isinstance(requests, DeferredToolRequests)
        first = asyncio.create_task(
            decide_deferred(inbox, "agents", requests, key_prefix="conv-1", timeout=600)
        )
        [item] = await pending(server, 1)
        # The program restarts and asks again about the same call: the same item answers.
        again = asyncio.create_task(
            decide_deferred(inbox, "agents", requests, key_prefix="conv-1", timeout=600)
        )
        await decide(server, item["id"], decision="edit", args={**ANN, "to": "dee@example.com"})
        results, results_again = await asyncio.gather(first, again)
        assert results.approvals == results_again.approvals
        assert await requests_made(server) == before + 1
        result = await agent.run(
            message_history=result.all_messages(), deferred_tool_results=results
        )
    assert sent == [{"to": "dee@example.com", "subject": "Quote"}]
    assert result.output == "Done: sent to dee@example.com"


async def test_one_decision_answers_every_waiter_of_the_client(
    server: ServerProcess, inbox: AsyncInbox
) -> None:
    created = await inbox.request("agents", title="Deploy", tool="deploy", args={"env": "prod"})
    assert created.pending and created.url.endswith(f"/items/{created.item_id}")
    waiting = asyncio.create_task(inbox.until_decided(created.id))

    def blocking() -> RequestState:
        with Inbox(server.url, TOKEN) as sync:
            return sync.until_decided(created.id)

    waiting_too = asyncio.create_task(asyncio.to_thread(blocking))
    await decide(server, created.item_id, decision="edit", args={"env": "staging"})
    one, two = await asyncio.gather(waiting, waiting_too)
    for d in (one, two):
        assert d.edited and d.args == {"env": "staging"} and d.via == "api"
    assert json.loads(one.model_dump_json()) == json.loads(two.model_dump_json())
