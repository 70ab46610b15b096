"""An accepted form carries the schema's defaults for the fields nobody changed, whichever way
it was answered: the same values reach the asker from the API, the web page, a mail reply, a
Slack modal (tests/scenarios/test_slack_questions.py) and `ask_human`'s requests, because
they are filled in once, where every channel's answer is built.

The "ask" MCP server (official SDK, its own process, stdio) asks for such a form in the
middle of a call, and its own log shows what came back.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pizzabot.agent.model import Approve, Edit, Item, ItemKind, ItemStatus, RunStatus
from pizzabot.agent.policy import Principal
from pizzabot.agent.requests import NewRequest, Requests
from pizzabot.agent.skills import SkillBook, parse_skill
from pizzabot.agent.testing.scripts import Reply, ToolCall, turns
from pizzabot.bot.core import build
from pizzabot.channels.email.questions import read_answer
from pizzabot.store.migrate import upgrade
from pizzabot.store.sql import SqlStore, connect
from tests.peers import mcp_elicit, mcp_tools
from tests.peers.inproc import InProcess
from tests.peers.mcp_elicit import DEFAULTS
from tests.peers.web import WebApp, csrf_of
from tests.scenarios.test_questions import question
from tests.waiting import eventually

#: The defaults, and the same with only the name changed.
ALL_DEFAULTS: dict[str, Any] = {
    "name": "John Doe",
    "age": 30,
    "score": 95.5,
    "status": "active",
    "verified": True,
}
ANN = {**ALL_DEFAULTS, "name": "Ann"}
OWNER = Principal.owner("api")


async def test_a_tools_form_accepted_as_proposed_reaches_the_server_with_its_defaults(
    tmp_path: Path,
) -> None:
    log = tmp_path / "ask.jsonl"
    script = turns(Reply(tool_calls=[ToolCall("ask__defaults", {})]), Reply(text="done"))
    skill = {
        "mcp_servers": {"ask": mcp_elicit.server_entry(log, legacy=True)},
        "tools": {"ask.defaults": "auto"},
    }
    async with InProcess(tmp_path, script, skill=skill) as h:
        run = await h.runs.start("test", "check please", by=OWNER)

        async def asked() -> Item | None:
            items = await h.store.list_items(run_id=run.id, status=ItemStatus.PENDING)
            return next((i for i in items if i.kind is ItemKind.QUESTION), None)

        item = await eventually(asked, what="the tool's question")
        assert item.args == ALL_DEFAULTS  # every card shows them as the proposal
        await h.inbox.decide(item.id, Approve(), by=OWNER)
        await h.wait(run.id, {RunStatus.DONE})

    [got] = [x for x in mcp_tools.read_log(log) if x["tool"] == "defaults"]
    assert (got["action"], got["content"]) == ("accept", ALL_DEFAULTS)
    assert got["types"] == {
        "name": "str",
        "age": "int",
        "score": "float",
        "status": "str",
        "verified": "bool",
    }


async def test_the_api_the_web_page_and_a_mail_reply_answer_with_the_same_defaults(
    tmp_path: Path,
) -> None:
    async with WebApp(tmp_path) as web:
        by_api = await question(web, schema=DEFAULTS)
        done = await web.inbox.decide(by_api.id, Edit({"name": "Ann"}), by=OWNER)
        assert done.final_args == ANN

        by_mail = await question(web, schema=DEFAULTS)
        reading = read_answer(by_mail, "name: Ann\n\nThanks,\nAlice")
        assert reading.decision is not None
        done = await web.inbox.decide(by_mail.id, reading.decision, by=OWNER)
        assert done.final_args == ANN

        # A page that posts only what changed (the page itself shows the defaults filled in).
        by_web = await question(web, schema=DEFAULTS)
        async with web.client(logged_in=True) as c:
            html = (await c.get(f"/items/{by_web.id}")).text
            post = {"csrf": csrf_of(html), "decision": "edit", "arg.name": "Ann"}
            post["arg.verified"] = "true"  # a checkbox is always sent: ticked or not
            sent = await c.post(f"/items/{by_web.id}", data=post)
            assert sent.status_code == 303, sent.text
        assert (await web.store.get_item(by_web.id)).final_args == ANN


async def test_ask_humans_answer_carries_the_defaults(tmp_path: Path) -> None:
    engine = connect(f"sqlite+aiosqlite:///{tmp_path / 'db.sqlite'}")
    await upgrade(engine)
    store = SqlStore(engine)
    try:
        skill = parse_skill("name: approvals\n", "approvals.yaml")
        core = build(store=store, skills=SkillBook({"approvals": skill}), channels={}, mind=None)
        requests = Requests(core.ctx)
        asked, _ = await requests.create(
            NewRequest(skill="approvals", title="Check", question="Check these", schema=DEFAULTS),
            by=OWNER,
        )
        await core.inbox.decide(asked.item_id, Edit({"name": "Ann"}), by=OWNER)
        answered = await requests.get(asked.id, by=OWNER)
        assert (answered.status, answered.args) == ("answered", ANN)
    finally:
        await store.aclose()
