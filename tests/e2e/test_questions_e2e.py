"""MCP elicitation end to end: a real `pizzabot serve`, the scripted model reached through
litellm, and the "ask" MCP server (official SDK, stdio) whose tools ask for input in the
middle of a call. The run pauses with a question item; it is answered through the API, in
headless Chromium (with JavaScript, and without it), declined, or left to time out, and the
tool's own log shows exactly what it received, with the types it received them as.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from playwright.async_api import Browser, Locator, Page, async_playwright, expect

from pizzabot.agent.testing.scripts import last_tool_result, last_user_text
from tests.peers import mcp_elicit, mcp_tools
from tests.peers.required import CHROMIUM
from tests.peers.server import TOKEN
from tests.peers.stack import Reply, Stack, ToolCall
from tests.waiting import eventually

pytestmark = [pytest.mark.browser, pytest.mark.asyncio(loop_scope="module")]

ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

#: A whole answer to `mcp_elicit.FORM`, as the API sends it.
ANSWER: dict[str, Any] = {
    "name": "Ann Lee",
    "email": "ann@example.com",
    "homepage": "https://ann.example.com/",
    "birthday": "1990-04-01",
    "meeting": "2026-12-01T09:30:00Z",
    "seats": 3,
    "budget": 12.5,
    "vip": True,
    "size": "medium",
    "color": "g",
    "tags": ["new", "late"],
    "pets": ["dog"],
}
TYPES = {
    "name": "str",
    "email": "str",
    "homepage": "str",
    "birthday": "str",
    "meeting": "str",
    "seats": "int",
    "budget": "float",
    "vip": "bool",
    "size": "str",
    "color": "str",
    "tags": "list",
    "pets": "list",
}


def call_the_named_tool(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Reply:
    """Call the "ask" tool the run's input names (`link` with the URL after it); then repeat
    what it returned."""
    result = last_tool_result(messages)
    if result is None:
        tool, _, rest = (last_user_text(messages) or "").partition(" ")
        args = {"url": rest} if tool == "link" else {}
        return Reply(text=f"I need to ask ({tool}).", tool_calls=[ToolCall(f"ask__{tool}", args)])
    return Reply(text=f"The tool said: {result}")


SKILL: dict[str, Any] = {
    "tools": {"ask.profile": "auto", "ask.connect": "auto", "ask.nested": "auto"},
}


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def stack(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Stack]:
    root = tmp_path_factory.mktemp("questions")
    ask = mcp_elicit.server_entry(root / "tools.jsonl")
    quick = {
        "name": "quick",
        "mcp_servers": {"ask": ask},
        "tools": {"ask.profile": {"policy": "auto", "timeout": "2s"}},
    }
    skill = {**SKILL, "mcp_servers": {"ask": ask}}
    async with Stack(root, script=call_the_named_tool, skill=skill, extra_skills=[quick]) as st:
        yield st


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def browser() -> AsyncIterator[Browser]:
    async with async_playwright() as p:
        b = await p.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        try:
            yield b
        finally:
            await b.close()


def answers(stack: Stack, tool: str) -> list[dict[str, Any]]:
    """What the "ask" server's tool received, oldest first (its own log)."""
    return [line for line in mcp_tools.read_log(stack.tools_log) if line.get("tool") == tool]


async def asked(stack: Stack, tool: str, *, skill: str = "test") -> tuple[str, dict[str, Any]]:
    """Start a run whose tool asks; the question item once it is there (the run held)."""
    run = await stack.start_run(skill, f"{tool} please")
    item = await stack.wait_item(run["id"], box="action")
    assert item["kind"] == "question"
    assert (await stack.get_run(run["id"]))["status"] == "running"  # held while the call waits
    return run["id"], item


async def tool_got(stack: Stack, tool: str, count: int) -> dict[str, Any]:
    async def logged() -> dict[str, Any] | None:
        lines = answers(stack, tool)
        return lines[-1] if len(lines) >= count else None

    return await eventually(logged, what=f"{tool} to get its answer", timeout=60)


async def test_a_form_answered_through_the_api_reaches_the_tool_typed(stack: Stack) -> None:
    before = len(answers(stack, "profile"))
    run_id, item = await asked(stack, "profile")
    assert item["schema"] == mcp_elicit.FORM
    assert item["body"] == "Fill in the customer's profile, please."
    # The form's defaults are the proposal (only `vip` has one).
    assert item["tool"] == "ask.profile" and item["args"] == {"vip": False}

    # A wrong answer is refused with the field named; the question stays open.
    bad = await stack.decide(item["id"], "edit", args={**ANSWER, "seats": "three"})
    assert bad.status_code == 422 and "seats" in bad.text
    bad = await stack.decide(item["id"], "edit", args={**ANSWER, "meeting": "tomorrow"})
    assert bad.status_code == 422 and "meeting" in bad.text
    # Accepting the proposal (the defaults) is refused too: required fields are missing.
    assert (await stack.decide(item["id"], "approve")).status_code == 422

    r = await stack.decide(item["id"], "edit", args=ANSWER)
    assert r.status_code == 200, r.text
    got = await tool_got(stack, "profile", before + 1)
    assert got["action"] == "accept"
    assert got["content"] == ANSWER
    assert got["types"] == TYPES
    run = await stack.wait_run(run_id, {"done"})
    assert '"action": "accept"' in (run.get("result") or "")
    kinds = [e["kind"] for e in run["events"]]
    assert "note" in kinds and "decision" in kinds


async def test_a_declined_question_tells_the_tool_decline(stack: Stack) -> None:
    before = len(answers(stack, "profile"))
    run_id, item = await asked(stack, "profile")
    r = await stack.decide(item["id"], "reject", reason="not now")
    assert r.status_code == 200, r.text
    got = await tool_got(stack, "profile", before + 1)
    assert got["action"] == "decline" and got["content"] is None
    await stack.wait_run(run_id, {"done"})
    async with stack.client() as c:
        after = (await c.get("/api/inbox", params={"box": "action", "all": "true"})).json()
    mine = next(i for i in after["items"] if i["id"] == item["id"])
    assert mine["status"] == "rejected" and mine["final_args"] is None


async def test_an_unanswered_question_times_out_and_the_tool_sees_cancel(stack: Stack) -> None:
    before = len(answers(stack, "profile"))
    run_id, item = await asked(stack, "profile", skill="quick")
    got = await tool_got(stack, "profile", before + 1)
    assert got["action"] == "cancel"
    await stack.wait_run(run_id, {"done"})
    async with stack.client() as c:
        after = (await c.get("/api/inbox", params={"box": "action", "all": "true"})).json()
    mine = next(i for i in after["items"] if i["id"] == item["id"])
    assert mine["status"] == "expired"
    # Too late now: the first decision (the clock's) won.
    assert (await stack.decide(item["id"], "edit", args=ANSWER)).status_code == 409


async def test_a_form_no_channel_can_draw_is_refused_with_a_note(stack: Stack) -> None:
    run = await stack.start_run("test", "nested please")
    got = await tool_got(stack, "nested", 1)
    assert got["action"] == "cancel"
    done = await stack.wait_run(run["id"], {"done"})
    notes = [e["data"] for e in done["events"] if e["kind"] == "note"]
    assert notes and "refused" in notes[0]["question"]
    assert (
        "flat object" in notes[0]["question"]["refused"]
        or "object" in notes[0]["question"]["refused"]
    )
    async with stack.client() as c:
        r = await c.get("/api/inbox", params={"box": "action", "all": "true"})
    assert not [i for i in r.json()["items"] if i["run_id"] == run["id"]]


async def signed_in(browser: Browser, stack: Stack, *, javascript: bool) -> Page:
    context = await browser.new_context(java_script_enabled=javascript)
    page = await context.new_page()
    await page.goto(f"{stack.server.url}/login?token={TOKEN}")
    return page


def field(page: Page, name: str) -> Locator:
    return page.locator(f'[name="arg.{name}"]')


async def fill_the_form(page: Page, values: dict[str, Any]) -> None:
    await field(page, "name").fill(values["name"])
    await field(page, "email").fill(values["email"])
    await field(page, "homepage").fill(values["homepage"])
    await field(page, "birthday").fill(values["birthday"])
    await field(page, "meeting").fill(values["meeting"])
    await field(page, "seats").fill(str(values["seats"]))
    await field(page, "budget").fill(str(values["budget"]))
    if values["vip"]:
        await field(page, "vip").check()
    await field(page, "size").select_option(values["size"])
    await page.get_by_label(re.compile(r"^Color")).select_option(label="Green")
    for tag in values["tags"]:
        await page.locator(f'input[name="arg.tags"][value="{tag}"]').check()
    await page.get_by_label("Dog", exact=True).check()


@pytest.mark.parametrize("javascript", [True, False], ids=["js", "no-js"])
async def test_a_form_answered_on_the_web_page_reaches_the_tool_typed(
    stack: Stack, browser: Browser, javascript: bool
) -> None:
    before = len(answers(stack, "profile"))
    run_id, item = await asked(stack, "profile")
    page = await signed_in(browser, stack, javascript=javascript)
    try:
        await page.goto(f"{stack.server.url}/items/{item['id']}")
        await expect(page.locator(".question .quote")).to_have_text(
            "Fill in the customer's profile, please."
        )
        # Titled choices read as their titles; nothing is chosen for the person.
        assert await page.get_by_label(re.compile(r"^Color")).locator(
            "option"
        ).all_inner_texts() == [
            "(choose one)",
            "Red",
            "Green",
            "Blue",
        ]
        await fill_the_form(page, ANSWER)
        await page.get_by_role("button", name="Send").click()
        await expect(page.get_by_text("Answer sent")).to_be_visible()
        got = await tool_got(stack, "profile", before + 1)
        assert got["action"] == "accept"
        assert got["content"] == ANSWER
        assert got["types"] == TYPES
        await stack.wait_run(run_id, {"done"})
        await page.goto(f"{stack.server.url}/runs/{run_id}")
        await expect(page.get_by_text("ask.profile asked a person")).to_be_visible()
        await expect(page.get_by_text(re.compile("Answered by owner"))).to_be_visible()
    finally:
        await page.context.close()


async def test_a_link_is_shown_with_its_domain_and_opened_only_when_asked(
    stack: Stack, browser: Browser
) -> None:
    before = len(answers(stack, "connect"))
    run_id, item = await asked(stack, "connect")
    assert item["schema"] is None and item["args"] == {"url": mcp_elicit.LINK}
    page = await signed_in(browser, stack, javascript=True)
    try:
        await page.goto(f"{stack.server.url}/items/{item['id']}")
        # The registrable domain in bold, the host beside it, then the whole link.
        await expect(page.locator(".link-domain b")).to_have_text("example.test")
        await expect(page.locator(".link-domain")).to_contain_text("(host auth.example.test)")
        await expect(page.get_by_text(mcp_elicit.LINK)).to_be_visible()
        opener = page.get_by_role("link", name="Yes, open example.test")
        await expect(opener).to_be_hidden()  # asks first: nothing opens by itself
        await page.get_by_text("Open link").click()
        await expect(opener).to_be_visible()
        assert await opener.get_attribute("href") == mcp_elicit.LINK
        assert "noopener" in (await opener.get_attribute("rel") or "")
        assert len(page.context.pages) == 1
        await page.get_by_role("button", name="Done").click()
        await expect(page.get_by_text("Answer sent")).to_be_visible()
        got = await tool_got(stack, "connect", before + 1)
        assert got["action"] == "accept" and got["content"] is None
        await stack.wait_run(run_id, {"done"})
    finally:
        await page.context.close()


async def test_a_link_declined_through_the_api(stack: Stack) -> None:
    before = len(answers(stack, "connect"))
    run_id, item = await asked(stack, "connect")
    # A link is accepted or declined, never edited.
    assert (await stack.decide(item["id"], "edit", args={"url": "x"})).status_code == 422
    assert (await stack.decide(item["id"], "reject")).status_code == 200
    got = await tool_got(stack, "connect", before + 1)
    assert got["action"] == "decline"
    done = await stack.wait_run(run_id, {"done"})
    assert json.dumps("decline") in (done.get("result") or "")


async def test_a_crash_while_a_question_waits_cancels_it_and_follows_the_crash_rules(
    tmp_path: Path,
) -> None:
    ask = mcp_elicit.server_entry(tmp_path / "tools.jsonl")
    async with Stack(
        tmp_path, script=call_the_named_tool, skill={**SKILL, "mcp_servers": {"ask": ask}}
    ) as st:
        run_id, item = await asked(st, "profile")
        st.server.kill()
        await st.server.start()
        done = await st.wait_run(run_id, {"done"})
        # An auto tool that is not idempotent is not called again: the model hears so.
        assert "outcome is unknown" in done["result"]
        assert answers(st, "profile") == []
        async with st.client() as c:
            items = (await c.get("/api/inbox", params={"box": "action", "all": "true"})).json()
        closed = next(i for i in items["items"] if i["id"] == item["id"])
        assert closed["status"] == "cancelled"
        assert (await st.decide(item["id"], "edit", args=ANSWER)).status_code == 409


async def test_a_server_over_http_asks_and_is_declined(tmp_path: Path) -> None:
    log = tmp_path / "tools.jsonl"
    async with mcp_elicit.serve_http(log=log) as url:
        skill = {**SKILL, "mcp_servers": {"ask": {"url": url}}}
        async with Stack(tmp_path, script=call_the_named_tool, skill=skill) as st:
            run_id, item = await asked(st, "connect")
            assert item["args"] == {"url": mcp_elicit.LINK}
            assert (await st.decide(item["id"], "reject")).status_code == 200
            got = await tool_got(st, "connect", 1)
            assert got["action"] == "decline"
            await st.wait_run(run_id, {"done"})
