"""The web inbox's pages in-process: boxes, items, budget items, late decisions, runs, the
timeline, starting, cancelling and following up runs, the audit log. Real SqlStore, real
Inbox and Runs; no worker, so runs stay where the test puts them."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import pytest

from pizzabot.agent.events import (
    AssistantMessage,
    Event,
    ModelCall,
    NewEvent,
    Note,
    ProposedCall,
    TimerRemark,
    ToolRequest,
    ToolResult,
    ToolStarted,
    load_event,
)
from pizzabot.agent.model import Approve, EventKind, ItemKind, ItemStatus, Risk, RunStatus
from pizzabot.agent.policy import Principal
from pizzabot.agent.timeline import entries
from tests.peers.web import T0, Form, WebApp, csrf_of

SCHEMA = {
    "type": "object",
    "properties": {"to": {"type": "string"}, "copies": {"type": "integer", "minimum": 1}},
    "required": ["to"],
}


@pytest.fixture
async def web(tmp_path: Path) -> AsyncIterator[WebApp]:
    async with WebApp(tmp_path) as app:
        yield app


async def test_the_inbox_shows_both_boxes_with_counts(web: WebApp) -> None:
    first = await web.action_item(schema=SCHEMA, args={"to": "a@x"}, risk=Risk(impact="high"))
    await web.unread_item("The report is ready.")
    async with web.client(logged_in=True) as c:
        page = await c.get("/")
    assert page.status_code == 200
    html = page.text
    assert '<span class="count hot">1</span>' in html and "<title>(1) Inbox" in html
    assert f'href="/items/{first.id}"' in html and "high impact" in html
    assert "test finished" in html and "The report is ready." in html
    assert 'data-live="/boxes"' in html


async def test_action_items_are_listed_newest_first(web: WebApp) -> None:
    older = await web.action_item(schema=SCHEMA, args={"to": "a@x"})
    newer = await web.action_item(schema=SCHEMA, args={"to": "b@x"})
    async with web.client(logged_in=True) as c:
        html = (await c.get("/boxes")).text
    assert html.index(f"/items/{newer.id}") < html.index(f"/items/{older.id}")


async def test_mark_read_one_and_all(web: WebApp) -> None:
    one = await web.unread_item("one")
    two = await web.unread_item("two")
    three = await web.unread_item("three")
    async with web.client(logged_in=True) as c:
        csrf = csrf_of((await c.get("/")).text)
        r = await c.post(f"/items/{one.id}/read", data={"csrf": csrf, "next": "/"})
        assert r.status_code == 303 and r.headers["location"] == "/?flash=read"
        assert (await web.store.get_item(one.id)).status is ItemStatus.READ
        assert f"/items/{one.id}" not in (await c.get("/")).text
        r = await c.post("/items/read-all", data={"csrf": csrf})
        assert r.status_code == 303
    for item in (two, three):
        assert (await web.store.get_item(item.id)).status is ItemStatus.READ


async def test_an_action_item_page_shows_context_tool_risk_and_three_decisions(
    web: WebApp,
) -> None:
    item = await web.action_item(
        schema=SCHEMA,
        args={"to": "ann@example.com", "copies": 2},
        body="Ann wants the quote.",
        risk=Risk(impact="high", reversible=False, scope="external"),
    )
    async with web.client(logged_in=True) as c:
        html = (await c.get(f"/items/{item.id}")).text
    assert "mail Ann" in html  # the run's input
    assert "Ann wants the quote." in html  # the model's last message
    assert "<code>send_email</code> on server <code>crm</code>" in html
    assert "high impact" in html and "cannot be undone" in html and "external" in html
    assert "ann@example.com" in html
    # The three forms post to the page's own address, each saying which decision it is.
    assert html.count(f'action="/items/{item.id}#decide"') == 3
    for decision in ("approve", "edit", "reject"):
        assert f'name="decision" value="{decision}"' in html


async def test_a_budget_item_offers_extend_and_stop_but_no_edit(web: WebApp) -> None:
    item = await web.action_item(
        schema={}, args={"tokens": 1000}, kind=ItemKind.BUDGET, body="token budget reached"
    )
    async with web.client(logged_in=True) as c:
        page = await c.get(f"/items/{item.id}")
        html = page.text
        assert ">Extend</button>" in html and ">Stop</summary>" in html
        assert "/edit" not in html and "Approve</button>" not in html
        r = await c.post(f"/items/{item.id}/approve", data={"csrf": csrf_of(html)})
        assert r.headers["location"] == f"/items/{item.id}?flash=extended"
        done = (await c.get(r.headers["location"])).text
    assert "Budget extended. The run goes on." in done
    assert "Budget extended by <b>owner</b> via <b>web</b>" in done


async def test_reject_sends_the_reason_and_the_page_then_shows_who_and_why(
    web: WebApp,
) -> None:
    item = await web.action_item(schema=SCHEMA, args={"to": "a@x"})
    async with web.client(logged_in=True) as c:
        csrf = csrf_of((await c.get(f"/items/{item.id}")).text)
        r = await c.post(
            f"/items/{item.id}/reject", data={"csrf": csrf, "reason": "  Not this week.  "}
        )
        assert r.headers["location"] == f"/items/{item.id}?flash=rejected"
        html = (await c.get(f"/items/{item.id}")).text
    decided = await web.store.get_item(item.id)
    assert decided.status is ItemStatus.REJECTED and decided.reason == "Not this week."
    assert "Rejected by <b>owner</b> via <b>web</b>" in html and "Not this week." in html
    assert 'name="decision"' not in html


async def test_a_late_decision_is_told_who_was_first(web: WebApp) -> None:
    item = await web.action_item(schema=SCHEMA, args={"to": "a@x"})
    async with web.client(logged_in=True) as c:
        page = await c.get(f"/items/{item.id}")
        csrf = csrf_of(page.text)
        await web.inbox.decide(item.id, Approve(), by=Principal.of("slack", "U123"))
        for action, data in (
            ("approve", {}),
            ("reject", {"reason": "no"}),
            ("edit", {"arg.to": "b@x"}),
        ):
            # The page's own address, and the per-decision one a page loaded earlier posts to.
            for path in (f"/items/{item.id}", f"/items/{item.id}/{action}"):
                r = await c.post(path, data={"csrf": csrf, "decision": action, **data})
                assert r.status_code == 303, path
                assert r.headers["location"] == f"/items/{item.id}?flash=late"
        html = (await c.get(f"/items/{item.id}?flash=late")).text
        # A link from before the flash messages had their own name shows the page, no message.
        old_link = await c.get(f"/items/{item.id}?note=late")
        state = (await c.get(f"/items/{item.id}/state")).text
    assert "Someone decided this before you" in html
    assert old_link.status_code == 200 and "Someone decided this before you" not in old_link.text
    assert "Approved by <b>U123</b> via <b>slack</b>" in html
    assert 'data-version="approved"' in state
    assert (await web.store.get_item(item.id)).decided_by == "U123"


async def test_everything_shown_is_escaped(web: WebApp) -> None:
    evil = "<script>alert('x')</script>"
    item = await web.action_item(schema=SCHEMA, args={"to": evil}, body=evil)
    async with web.client(logged_in=True) as c:
        for path in ("/", f"/items/{item.id}", f"/runs/{item.run_id}"):
            html = (await c.get(path)).text
            assert "<script>alert" not in html, path
            if path.startswith("/items/"):
                assert (
                    html.count("&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;") == 3
                )  # body, args, form


async def test_runs_list_shows_status_skill_trigger_tokens_and_times(web: WebApp) -> None:
    run_id = await web.run("list me", status=RunStatus.DONE)
    async with web.client(logged_in=True) as c:
        html = (await c.get("/runs")).text
    row = html[html.index(f"/runs/{run_id}") :]
    row = row[: row.index("</tr>")]
    assert "status-done" in row and ">test<" in row and ">api<" in row
    assert "2026-01-01 09:00:00 UTC" in row


async def test_start_a_run_from_the_form(web: WebApp) -> None:
    async with web.client(logged_in=True) as c:
        page = await c.get("/runs/new")
        form = Form(page.text)
        assert [o["value"] for o in form.controls["skill"]["options"]] == ["test"]
        csrf = csrf_of(page.text)
        r = await c.post("/runs", data={"csrf": csrf, "skill": "test", "input": "hello"})
        assert r.status_code == 303
        run_id = r.headers["location"].split("/")[2].split("?")[0]
        unknown = await c.post("/runs", data={"csrf": csrf, "skill": "nope", "input": "x"})
        assert unknown.status_code == 422 and "Pick one of the skills" in unknown.text
        assert "x</textarea>" in unknown.text  # the input is kept
    run = await web.store.get_run(run_id)
    assert (run.input, run.trigger, run.status) == ("hello", "web", RunStatus.QUEUED)


async def test_cancel_a_run_and_find_it_in_the_audit_log(web: WebApp) -> None:
    item = await web.action_item(schema=SCHEMA, args={"to": "a@x"})
    async with web.client(logged_in=True) as c:
        page = await c.get(f"/runs/{item.run_id}")
        assert "Cancel run" in page.text and "Waiting for you" in page.text
        csrf = csrf_of(page.text)
        r = await c.post(f"/runs/{item.run_id}/cancel", data={"csrf": csrf})
        assert r.headers["location"] == f"/runs/{item.run_id}?flash=cancelled"
        again = await c.post(f"/runs/{item.run_id}/cancel", data={"csrf": csrf})
        assert again.headers["location"] == f"/runs/{item.run_id}?flash=ended"
        audit = (await c.get("/audit")).text
    run = await web.store.get_run(item.run_id)
    assert run.status is RunStatus.CANCELLED and "owner via web" in (run.error or "")
    assert (await web.store.get_item(item.id)).status is ItemStatus.CANCELLED
    [row] = [r for r in audit.split("<tr>") if "<b>cancel</b>" in r]
    assert '"Who">owner</td>' in row and '"Channel">web</td>' in row
    assert f"/runs/{item.run_id}" in row


async def test_a_follow_up_message_continues_a_finished_run(web: WebApp) -> None:
    run_id = await web.run("first", status=RunStatus.DONE)
    async with web.client(logged_in=True) as c:
        page = await c.get(f"/runs/{run_id}")
        assert "Send a follow-up message" in page.text and "Cancel run" not in page.text
        csrf = csrf_of(page.text)
        empty = await c.post(f"/runs/{run_id}/messages", data={"csrf": csrf, "text": "  "})
        assert empty.headers["location"].endswith("flash=empty")
        r = await c.post(f"/runs/{run_id}/messages", data={"csrf": csrf, "text": "And Bob?"})
        assert r.headers["location"] == f"/runs/{run_id}?flash=sent"
    assert (await web.store.get_run(run_id)).status is RunStatus.QUEUED
    last = (await web.store.events(run_id))[-1]
    assert last.kind is EventKind.USER_MESSAGE
    assert last.data == {"text": "And Bob?", "by": "owner", "channel": "web"}


async def test_the_timeline_shows_model_calls_tools_and_decisions(web: WebApp) -> None:
    item = await web.action_item(schema=SCHEMA, args={"to": "a@x", "copies": 1})
    await web.store.append_events(
        item.run_id,
        [
            NewEvent(ModelCall(model="openai/x", tokens_in=1200, tokens_out=34, latency_ms=812.5,
                               cost_usd=0.0021, attempts=2)),
            NewEvent(AssistantMessage(text="Mailing.", tool_calls=[
                ProposedCall(id="call1", name="crm__send_email", arguments={"to": "a@x"})])),
            NewEvent(ToolRequest(call_id="call1", item_id=item.id, tool="crm.send_email",
                                 args={"to": "a@x"})),
        ],
        lease=None,
        now=T0,
    )  # fmt: skip
    async with web.client(logged_in=True) as c:
        csrf = csrf_of((await c.get(f"/items/{item.id}")).text)
        await c.post(
            f"/items/{item.id}/edit", data={"csrf": csrf, "arg.to": "b@x", "arg.copies": "3"}
        )
        await web.store.append_events(
            item.run_id,
            [
                NewEvent(ToolStarted(call_id="call1", tool="crm.send_email",
                                     args={"to": "b@x", "copies": 3})),
                NewEvent(ToolResult(call_id="call1", tool="crm.send_email", text="sent to b@x",
                                    duration_ms=1530, args={"to": "b@x", "copies": 3})),
                NewEvent(Note(reminder=TimerRemark(item_id=item.id, tool="a note"))),
            ],
            lease=None,
            now=T0,
        )  # fmt: skip
        html = (await c.get(f"/runs/{item.run_id}")).text
        live = (await c.get(f"/runs/{item.run_id}/live")).text
    assert "Model call: openai/x" in html
    assert "1200" in html and "812 ms" in html and "$0.0021" in html and "attempts" in html
    assert "Model asked for 1 tool call" in html and "Calls crm.send_email" in html
    assert "Asked a person about crm.send_email" in html
    assert "Edited and approved by owner" in html and "via</span> web" in html
    assert "to: &#34;a@x&#34; → &#34;b@x&#34;" in html and "copies: 1 → 3" in html
    assert "Tool crm.send_email returned" in html and "1.53 s" in html and "sent to b@x" in html
    assert "Note" in html and "a note" in html
    # Usage comes from the model calls: tokens, steps and cost.
    assert "1,234" in html and "$0.0021" in html
    assert 'data-version="active"' in live and "Timeline" in live


def _event(seq: int, kind: EventKind, data: dict[str, object], seconds: float = 0) -> Event:
    at = T0 + timedelta(seconds=seconds)
    return load_event(run_id="r", seq=seq, kind=kind, data=data, at=at, version=1)


def test_timeline_entries_read_like_a_story() -> None:
    got = entries(
        [
            _event(1, EventKind.RUN_STARTED, {"input": "go", "trigger": "web", "by": "owner"}),
            _event(2, EventKind.TOOL_STARTED, {"call_id": "c", "tool": "t.x", "args": {"a": 1}}, 2),
            _event(3, EventKind.TOOL_RESULT, {"call_id": "c", "tool": "t.x", "text": "boom",
                                              "is_error": True, "duration_ms": 5,
                                              "args": {"a": 1}}, 75),
            _event(4, EventKind.DECISION, {"item_id": "i", "decision": "reject", "actor": "ann@x",
                                           "channel": "email", "reason": "no"}, 4000),
            _event(5, EventKind.DECISION, {"item_id": "i", "decision": "expired", "actor": "timeout",
                                           "channel": "timer"}),
            _event(6, EventKind.RUN_FINISHED, {"status": "failed", "error": "gave up"}),
            _event(7, EventKind.NOTE, {"reminder": {"item_id": "i", "targets": ["slack:C1"]}}),
        ]
    )  # fmt: skip
    assert [e.title for e in got] == [
        "Run started",
        "Tool t.x started",
        "Tool t.x failed",
        "Rejected by ann@x",
        "Expired: nobody decided in time",
        "Run failed",
        "Note",
    ]
    assert [e.offset for e in got[:4]] == ["+0.0 s", "+2.0 s", "+1 min 15 s", "+1.1 h"]
    assert got[1].blocks == []  # the result below shows the arguments
    assert [b.label for b in got[2].blocks] == ["Arguments", "Result"] and got[2].failed
    assert got[3].facts == [("via", "email")] and got[3].blocks[0].text == "no"
    assert got[5].failed and got[5].blocks[0].text == "gave up"
    assert "slack:C1" in got[6].blocks[0].text and got[6].blocks[0].code


def _model_call(cost: float | None) -> NewEvent:
    return NewEvent(ModelCall(model="m", tokens_in=10, tokens_out=5, latency_ms=3, cost_usd=cost))


def _cost_shown(live: str) -> str:
    """The text of the Cost fact, tags stripped."""
    cell = live[live.index('class="cost"') :]
    cell = cell[cell.index(">") + 1 : cell.index("</dd>")]
    return " ".join(re.sub(r"<[^>]+>", " ", cell).split())


async def test_a_runs_cost_says_what_is_known(web: WebApp) -> None:
    running = await web.run("price me", status=RunStatus.RUNNING)
    unpriced = await web.run("local model", status=RunStatus.RUNNING)
    mixed = await web.run("both", status=RunStatus.RUNNING)
    async with web.client(logged_in=True) as c:

        async def cost(run_id: str) -> str:
            return _cost_shown((await c.get(f"/runs/{run_id}/live")).text)

        assert await cost(running) == "— no model call yet"
        await web.store.append_events(running, [_model_call(0.0021)], lease=None, now=T0)
        assert await cost(running) == "$0.0021 so far"
        await web.store.append_events(running, [_model_call(0.00003)], lease=None, now=T0)
        assert await cost(running) == "$0.0021 so far"
        await web.store.append_events(unpriced, [_model_call(None)], lease=None, now=T0)
        assert await cost(unpriced) == "not priced the model has no known price"
        await web.store.append_events(
            mixed, [_model_call(0.5), _model_call(None)], lease=None, now=T0
        )
        assert await cost(mixed) == "at least $0.5000 some model calls are not priced"
        await web.store.set_status(running, RunStatus.DONE, lease=None, now=T0)
        assert await cost(running) == "$0.0021"  # the sum, no longer "so far"
        timeline = (await c.get(f"/runs/{unpriced}")).text
    assert "cost</span> not priced" in timeline  # the model call itself says so too


async def test_tables_name_their_columns_in_every_cell_for_phones(web: WebApp) -> None:
    item = await web.action_item(schema=SCHEMA, args={"to": "a@x"})
    await web.store.audit(
        action="decision",
        actor="owner",
        channel="web",
        now=T0,
        item_id=item.id,
        detail={"decision": "edit", "args_before": {"body": "x" * 200}, "args_after": {"a": 1}},
    )
    async with web.client(logged_in=True) as c:
        runs = (await c.get("/runs")).text
        audit = (await c.get("/audit")).text
    for html in (runs, audit):
        cells = re.findall(r"<td[^>]*>", html)
        assert cells and all("data-label=" in td for td in cells)
    # A long value (arguments before an edit) is folded; short ones stay in the line.
    [row] = [r for r in audit.split("<tr>") if "<b>decision</b>" in r]
    assert "decision=edit, args_after={&#34;a&#34;: 1}" in row
    assert "<summary>args_before</summary>" in row and "x" * 200 in row


async def test_the_start_form_leaves_out_inbox_only_skills(tmp_path: Path) -> None:
    from pizzabot.agent.skills import Skill

    answering = Skill(name="approvals")
    async with WebApp(tmp_path, skill=answering) as app, app.client(logged_in=True) as c:
        page = await c.get("/runs/new")
        assert "No skill here starts runs" in page.text and 'name="skill"' not in page.text
        csrf = csrf_of(page.text)
        refused = await c.post("/runs", data={"csrf": csrf, "skill": "approvals", "input": "x"})
        assert refused.status_code == 422
