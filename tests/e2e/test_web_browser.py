"""The web inbox in a real browser: headless Debian Chromium against a real `pizzabot serve`
process, a scripted model reached through litellm and the test MCP server.

One server and one browser serve the whole module; each test starts its own run. The edit
story runs with JavaScript off, to show the page needs none. Every page is shot at desktop
and phone width into test-output/ (web-*-desktop.png, web-*-phone.png), and at phone width
each must fit the screen: nothing wider than the window, tables read as cards.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import pytest_asyncio
from playwright.async_api import (
    Browser,
    BrowserContext,
    Page,
    Request,
    ViewportSize,
    async_playwright,
    expect,
)

from pizzabot.agent.testing.scripts import last_tool_result
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
DESKTOP: ViewportSize = {"width": 1280, "height": 900}
PHONE: ViewportSize = {"width": 390, "height": 844}

EMAIL = {
    "to": "ann@example.com",
    "subject": "Your quote",
    "body": "Hello Ann,\nhere is the quote we talked about.\nBest, Bob",
    "priority": "normal",
    "copies": 1,
}


def send_then_quote(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Reply:
    """Propose send_email once; afterwards quote what the tool (or the rejection) said."""
    result = last_tool_result(messages)
    if result is None:
        return Reply(
            text="Ann asked for the quote, so I will mail it to her now.",
            tool_calls=[ToolCall("crm__send_email", dict(EMAIL))],
        )
    return Reply(text=f"Finished. The tool said: {result}")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def stack(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Stack]:
    async with Stack(tmp_path_factory.mktemp("web"), script=send_then_quote) as st:
        yield st


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def browser() -> AsyncIterator[Browser]:
    async with async_playwright() as p:
        b = await p.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        try:
            yield b
        finally:
            await b.close()


async def logged_in(
    browser: Browser, stack: Stack, *, javascript: bool = True
) -> tuple[BrowserContext, Page]:
    # The page's service worker is the phone tests' subject; here it would only add a
    # Chromium part these tests do not look at.
    context = await browser.new_context(
        viewport=DESKTOP, java_script_enabled=javascript, service_workers="block"
    )
    page = await context.new_page()
    await page.goto(f"{stack.server.url}/login?token={TOKEN}")
    assert TOKEN not in page.url  # the link swapped the token for a cookie and moved on
    return context, page


async def shoot(page: Page, path: Path) -> None:
    """A full-page screenshot at desktop width, then at phone width, where the page must fit."""
    await page.set_viewport_size(DESKTOP)
    await page.screenshot(path=str(path.with_name(path.stem + "-desktop.png")), full_page=True)
    await page.set_viewport_size(PHONE)
    await fits_the_screen(page)
    await page.screenshot(path=str(path.with_name(path.stem + "-phone.png")), full_page=True)
    await page.set_viewport_size(DESKTOP)


async def fits_the_screen(page: Page) -> None:
    """Nothing makes the page scroll sideways; on failure, say which elements stick out."""
    wide, window, culprits = await page.evaluate(
        """() => {
            const w = window.innerWidth;
            const out = [...document.querySelectorAll("body *")]
                .filter(e => e.getBoundingClientRect().right > w + 0.5)
                .slice(0, 5)
                .map(e => e.tagName.toLowerCase() + (e.className ? "." + e.className : ""));
            return [document.documentElement.scrollWidth, w, out];
        }"""
    )
    assert wide <= window, f"{page.url} is {wide}px wide in a {window}px window: {culprits}"


def path_of(url: str) -> str:
    return urlsplit(url).path


async def test_the_login_link_leaves_a_strict_httponly_cookie_and_no_token(
    browser: Browser, stack: Stack
) -> None:
    context, page = await logged_in(browser, stack)
    try:
        assert page.url == f"{stack.server.url}/"
        await expect(page.get_by_role("heading", name=re.compile("^Action"))).to_be_visible()
        assert TOKEN not in await page.content()
        cookies = await context.cookies()
        assert [c["name"] for c in cookies] == ["pizzabot_session"]
        assert cookies[0]["httpOnly"] and cookies[0]["sameSite"] == "Strict"
        assert TOKEN not in cookies[0]["value"]

        # Another browser without the cookie is sent to the login form; a wrong token fails.
        stranger = await browser.new_context(service_workers="block")
        other = await stranger.new_page()
        await other.goto(f"{stack.server.url}/runs")
        assert other.url.startswith(f"{stack.server.url}/login?next=")
        await other.fill("#token", "not-the-token")
        await other.click("button[type=submit]")
        await expect(other.locator("p.error")).to_contain_text("not the API token")
        await other.fill("#token", TOKEN)
        await other.click("button[type=submit]")
        assert other.url == f"{stack.server.url}/runs"  # back where it wanted to go
        await stranger.close()
    finally:
        await context.close()


async def test_edit_an_integer_and_an_enum_with_javascript_off(
    browser: Browser, stack: Stack, output_dir: Path
) -> None:
    run = await stack.start_run("test", "Send Ann the quote she asked for")
    item = await stack.wait_item(run["id"])
    context, page = await logged_in(browser, stack, javascript=False)
    try:
        action = page.locator("#boxes .box").first
        await expect(action.locator(".count")).to_have_text(re.compile(r"[1-9]"))
        await shoot(page, output_dir / "web-inbox")
        await action.get_by_role(
            "link", name=re.compile("wants to run crm.send_email")
        ).first.click()
        assert page.url.endswith(f"/items/{item['id']}")
        await expect(page.locator("text=Ann asked for the quote")).to_be_visible()
        await expect(page.locator(".tool")).to_contain_text("send_email")
        await expect(page.locator(".tool")).to_contain_text("crm")
        await expect(page.locator(".risk")).to_contain_text("high impact")
        await expect(page.locator(".risk")).to_contain_text("cannot be undone")
        await expect(page.locator(".risk")).to_contain_text("external")
        await shoot(page, output_dir / "web-action-item")

        await page.locator("summary", has_text="Edit").click()
        # Each input is found by its label, as a screen reader finds it.
        copies = page.get_by_label("Copies", exact=True)
        priority = page.get_by_label("Priority", exact=True)
        assert await copies.get_attribute("type") == "number"
        assert await page.get_by_label("Receipt", exact=True).get_attribute("type") == "checkbox"
        await expect(copies).to_have_value("1")
        await expect(priority).to_have_value("normal")
        await copies.fill("50")
        await priority.select_option("high")
        await page.get_by_role("button", name="Approve with these arguments").click()

        # The server refused it: the form is back with what was typed and the reason, at the
        # item's own address (a reload or a copied link shows the item, not a dead end).
        await expect(page.locator(".has-error .field-error")).to_contain_text("at most 10")
        assert path_of(page.url) == f"/items/{item['id']}"
        await expect(copies).to_have_value("50")
        await expect(priority).to_have_value("high")
        await expect(page.get_by_label("To *", exact=True)).to_have_value("ann@example.com")
        await shoot(page, output_dir / "web-action-item-error")
        assert (await stack.get_run(run["id"]))["status"] == "waiting"

        await copies.fill("3")
        await page.get_by_role("button", name="Approve with these arguments").click()
        await expect(page.locator(".decided")).to_contain_text(
            "Edited and approved by owner via web"
        )
        edited = {**EMAIL, "copies": 3, "priority": "high"}
        done = await stack.wait_run(run["id"], {"done"})
        sent = [{k: c["args"][k] for k in EMAIL} for c in stack.tool_calls()]
        assert edited in sent and sent.count(edited) == 1

        # The finished run is in Unread; its timeline shows the edited arguments.
        await page.goto(f"{stack.server.url}/")
        unread = page.locator("#boxes .box").nth(1)
        await expect(unread).to_contain_text("test finished")
        await page.goto(f"{stack.server.url}/runs/{run['id']}")
        decision = page.locator(".ev.decision")
        await expect(decision).to_contain_text("Edited and approved by owner")
        await expect(decision).to_contain_text("via web")
        after = decision.locator(".ev-block", has_text="Arguments after").locator("pre")
        # The form sends every field: the optional ones the model left out come as empty.
        assert json.loads(await after.inner_text()) == {**edited, "cc": None, "receipt": False}
        result = page.locator(".ev.tool", has_text="returned")
        await expect(result).to_contain_text("sent to ann@example.com")
        await expect(result).to_contain_text('"copies": 3')
        await expect(page.locator(".ev.model").first).to_contain_text("tokens in")
        await expect(page.locator(".facts-grid")).to_contain_text("done")
        assert done["usage"]["tokens"] > 0
        await expect(page.locator(".facts-grid")).to_contain_text(f"{done['usage']['tokens']:,}")
        # The scripted model is not in litellm's price list: the page says so, not "$0".
        assert done["usage"]["cost_known"] is False
        await expect(page.locator(".facts-grid .cost")).to_contain_text("not priced")
        await expect(page.locator(".ev.model").first).to_contain_text("cost not priced")
        await shoot(page, output_dir / "web-run-timeline")
    finally:
        await context.close()


async def test_reject_with_a_reason_the_model_reads(browser: Browser, stack: Stack) -> None:
    run = await stack.start_run("test", "Send Ann the quote")
    item = await stack.wait_item(run["id"])
    context, page = await logged_in(browser, stack)
    try:
        await page.goto(f"{stack.server.url}/items/{item['id']}")
        await page.locator("summary", has_text="Reject").click()
        await page.fill("#reason", "Ann is on holiday until Monday")
        await page.locator("details.reject button[type=submit]").click()
        await expect(page.locator(".decided")).to_contain_text("Rejected by owner via web")
        await expect(page.locator(".decided")).to_contain_text("Ann is on holiday until Monday")

        done = await stack.wait_run(run["id"], {"done"})
        assert "Ann is on holiday until Monday" in done["result"]  # the model quoted it
        await page.goto(f"{stack.server.url}/runs/{run['id']}")
        await expect(page.locator(".card", has_text="Result")).to_contain_text(
            "Ann is on holiday until Monday"
        )
        await expect(page.locator(".ev.tool", has_text="rejected")).to_be_visible()
    finally:
        await context.close()


#: Counts the page's interval timers: the live regions keep none, they long-poll.
COUNT_INTERVALS = """
    window.__intervals = 0;
    const every = window.setInterval;
    window.setInterval = function () { window.__intervals += 1; return every.apply(this, arguments); };
"""


async def test_an_open_inbox_shows_a_new_card_by_itself_and_a_reload_shows_it_without_script(
    browser: Browser, stack: Stack
) -> None:
    live_context, live = await logged_in(browser, stack)
    still_context, still = await logged_in(browser, stack, javascript=False)
    # What the open inbox asks for, in order, with a mark where the card is made.
    seen: list[tuple[str, Request | None]] = []
    live.on("request", lambda r: seen.append(("sent", r)) if "/boxes" in r.url else None)
    live.on(
        "requestfinished", lambda r: seen.append(("answered", r)) if "/boxes" in r.url else None
    )
    await live_context.add_init_script(COUNT_INTERVALS)
    try:
        for page in (live, still):
            await page.goto(f"{stack.server.url}/")
            await expect(page.locator("#boxes")).to_be_visible()
        # The page's first ask learns what the list's fingerprint is; its next one says it and
        # is held.
        await eventually(
            lambda: any(k == "sent" and r and "seen=&" not in r.url for k, r in seen),
            what="the inbox to ask with the fingerprint of what it shows",
        )
        seen.append(("card made", None))
        run = await stack.start_run("test", "Send Ann the quote while the inbox is open")
        item = await stack.wait_item(run["id"])
        row = f"#boxes a[href='/items/{item['id']}']"

        # With JavaScript the open inbox shows the card without a reload, and the tab says so.
        await expect(live.locator(row)).to_be_visible(timeout=15_000)
        await expect(live).to_have_title(re.compile(r"^\([1-9]\d*\) Inbox"))
        # It came in the answer to an ask sent before the card was made: held, not a timer.
        await held_across_the_card(seen, item["id"])
        assert await live.evaluate("window.__intervals") == 0
        # Without, the page stays as it was, and a reload shows the card, ready to decide.
        await expect(still.locator(row)).to_have_count(0)
        await still.reload()
        await still.locator(row).click()
        await still.get_by_role("button", name="Approve").click()
        await expect(still.locator(".decided")).to_contain_text("Approved by owner via web")
        await stack.wait_run(run["id"], {"done"})
        # And the open inbox lets the card go by itself too.
        await expect(live.locator(row)).to_have_count(0, timeout=15_000)
    finally:
        await live_context.close()
        await still_context.close()


async def held_across_the_card(seen: list[tuple[str, Request | None]], item_id: str) -> None:
    """Some ask of the inbox was sent before the card was made, with the fingerprint of the
    list then and a wait, and its answer (after) carried the card."""
    mark = seen.index(("card made", None))
    sent_before = {id(r) for k, r in seen[:mark] if k == "sent"}
    for kind, request in seen[mark:]:
        if kind != "answered" or request is None or id(request) not in sent_before:
            continue
        response = await request.response()
        assert response is not None
        if response.status == 200 and f"/items/{item_id}" in await response.text():
            assert "seen=" in request.url and "seen=&" not in request.url
            assert "wait=25" in request.url
            return
    raise AssertionError(f"no ask held across the card: {[(k, r and r.url) for k, r in seen]}")


async def test_a_decision_made_through_the_api_shows_on_an_open_page(
    browser: Browser, stack: Stack
) -> None:
    run = await stack.start_run("test", "Send Ann the quote")
    item = await stack.wait_item(run["id"])
    live_context, live = await logged_in(browser, stack)
    still_context, still = await logged_in(browser, stack, javascript=False)
    try:
        for page in (live, still):
            await page.goto(f"{stack.server.url}/items/{item['id']}")
            await expect(page.get_by_role("button", name="Approve")).to_be_visible()

        r = await stack.decide(item["id"], "approve")
        assert r.status_code == 200

        # With JavaScript the page notices by itself; without, a reload shows it.
        await expect(live.locator(".decided")).to_contain_text(
            "Approved by owner via api", timeout=15_000
        )
        await expect(still.get_by_role("button", name="Approve")).to_be_visible()
        await still.reload()
        await expect(still.locator(".decided")).to_contain_text("Approved by owner via api")
        await expect(still.get_by_role("button", name="Approve")).to_have_count(0)
        await expect(still.locator(".decided")).to_contain_text("ann@example.com")  # final args
        await stack.wait_run(run["id"], {"done"})
    finally:
        await live_context.close()
        await still_context.close()


async def test_start_a_run_from_the_form_then_cancel_and_read_the_audit(
    browser: Browser, stack: Stack
) -> None:
    context, page = await logged_in(browser, stack)
    try:
        await page.goto(f"{stack.server.url}/runs/new")
        await page.select_option("#skill", "test")
        await page.fill("#input", "Quote for Carl")
        await page.get_by_role("button", name="Start").click()
        await expect(page.locator(".banner.ok")).to_contain_text("Run started")
        run_id = page.url.rsplit("/", 1)[1].split("?")[0]
        await stack.wait_item(run_id)
        await page.reload()
        await expect(page.locator(".banner.warn")).to_contain_text("Waiting for you")
        await page.get_by_role("button", name="Cancel run").click()
        await expect(page.locator(".facts-grid")).to_contain_text("cancelled")
        run = await stack.get_run(run_id)
        assert run["status"] == "cancelled" and run["trigger"] == "web"
        assert run["events"][-1]["data"]["by"] == "owner"

        await page.goto(f"{stack.server.url}/runs")
        row = page.locator("tr", has_text=run_id[:8])
        await expect(row).to_contain_text("cancelled")
        await expect(row).to_contain_text("web")

        await page.goto(f"{stack.server.url}/audit")
        cancel = page.locator("tr", has_text="cancel").filter(has_text=run_id[:8])
        await expect(cancel.first).to_contain_text("owner")
        await expect(cancel.first).to_contain_text("web")
    finally:
        await context.close()


async def test_every_page_fits_a_phone_and_tables_read_as_cards(
    browser: Browser, stack: Stack, output_dir: Path
) -> None:
    run = await stack.start_run("test", "Send Ann the quote, then tell me")
    item = await stack.wait_item(run["id"])
    decided = await stack.start_run("test", "Send Ann the quote again")
    decided_item = await stack.wait_item(decided["id"])
    assert (await stack.decide(decided_item["id"], "approve")).status_code == 200
    done = await stack.wait_run(decided["id"], {"done"})

    stranger = await browser.new_context(viewport=DESKTOP, service_workers="block")
    login = await stranger.new_page()
    context, page = await logged_in(browser, stack)
    try:
        await login.goto(f"{stack.server.url}/login")
        await shoot(login, output_dir / "web-login")

        pages = {
            "web-inbox": "/",
            "web-action-item": f"/items/{item['id']}",
            "web-decided-item": f"/items/{decided_item['id']}",
            "web-run-waiting": f"/runs/{run['id']}",
            "web-run-timeline": f"/runs/{decided['id']}",
            "web-runs": "/runs",
            "web-new-run": "/runs/new",
            "web-schedules": "/schedules",
            "web-audit": "/audit",
            "web-not-found": "/items/no-such-item",
        }
        for name, path in pages.items():
            await page.goto(f"{stack.server.url}{path}")
            await shoot(page, output_dir / name)

        # Runs: every column of a run is on screen at phone width, the tokens included.
        await page.goto(f"{stack.server.url}/runs")
        await page.set_viewport_size(PHONE)
        row = page.locator("table.runs tbody tr", has_text=decided["id"][:8])
        tokens = row.locator("td[data-label=Tokens]")
        await expect(tokens).to_be_visible()
        await expect(tokens).to_contain_text(f"{done['usage']['tokens']:,}")
        for cell in await row.locator("td").all():
            box = await cell.bounding_box()
            assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"]

        # Audit: each entry is a short card whose detail has the width of the screen, so a
        # phone shows several entries at once instead of one tall, narrow column.
        await page.goto(f"{stack.server.url}/audit")
        rows = page.locator("table.audit tbody tr")
        assert await rows.count() >= 3
        heights = await rows.evaluate_all("rs => rs.map(r => r.getBoundingClientRect().height)")
        assert max(heights) < PHONE["height"] / 3, heights
        details = await page.locator("table.audit td[data-label=Detail]:not(:empty)").evaluate_all(
            "ds => ds.map(d => d.getBoundingClientRect().width)"
        )
        assert details and min(details) > PHONE["width"] / 2, details
        await expect(rows.first.locator("td[data-label=Who]")).to_contain_text("owner")
    finally:
        await context.close()
        await stranger.close()
    await stack.decide(item["id"], "reject", reason="enough pictures")
