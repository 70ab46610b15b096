"""Approval fatigue on a served bot: after a few decisions through the API, `pizzabot stats`
(text and `--json`) and the web page's Stats show the same figures and the rule that would
stop asking; only an admin sees them."""

from __future__ import annotations

import asyncio
import html
import json
from pathlib import Path
from typing import Any

import httpx
from playwright.async_api import async_playwright, expect

from tests.e2e.test_cli import cli
from tests.e2e.test_web_browser import ARGS, DESKTOP, shoot
from tests.peers.grant_stories import calls, calls_from_input, mail
from tests.peers.required import CHROMIUM
from tests.peers.server import TOKEN
from tests.peers.stack import Stack

SAME = ("a@x.example", "same")


async def decided(st: Stack, to: str, subject: str, decision: str, **kw: Any) -> None:
    run = await st.start_run("test", calls((to, subject)))
    item = await st.wait_item(run["id"], status="pending")
    assert (await st.decide(item["id"], decision, **kw)).status_code == 200
    await st.wait_run(run["id"], {"done"})


async def test_stats_from_the_terminal_and_the_page_after_decisions(
    tmp_path: Path, output_dir: Path
) -> None:
    # ann is a person of the skill, but approves none of its tools.
    ann = {"people": {"ann": {"email": "ann@x.example"}}}
    async with Stack(tmp_path, script=calls_from_input, skill=ann) as st:
        for _ in range(3):
            await decided(st, *SAME, "approve")
        await decided(st, "b@x.example", "other", "reject", reason="no")

        shown = await asyncio.to_thread(cli, st, "stats", "--json")
        assert shown.returncode == 0, shown.stderr
        data = json.loads(shown.stdout)
        text = await asyncio.to_thread(cli, st, "stats", "--since", "7d")
        dated = await asyncio.to_thread(cli, st, "stats", "--since", "2020-01-01", "--json")
        future = await asyncio.to_thread(cli, st, "stats", "--since", "2999-01-01", "--json")
        wrong = await asyncio.to_thread(cli, st, "stats", "--since", "last tuesday")
        async with st.client() as c:
            made = await c.post(
                "/api/tokens", json={"name": "ann", "scope": "decide", "person": "ann"}
            )
            ann = made.json()["token"]
            as_ann = await c.get("/api/stats", headers={"Authorization": f"Bearer {ann}"})
        pages = await _pages(st.server.url, ann)
        await _in_a_browser(st.server.url, output_dir)

    assert data["cards"] == 4
    o = data["outcomes"]
    assert (o["approved"], o["rejected"], o["pending"], o["approve_rate"]) == (3, 1, 0, 0.75)
    assert [(p["person"], p["cards"], p["days"]) for p in data["people"]] == [("owner", 4, 1)]
    assert [(t["tool"], t["cards"]) for t in data["tools"]] == [("crm.send_email", 4)]
    (repeat,) = data["repeats"]
    assert (repeat["tool"], repeat["kind"], repeat["approved"]) == ("crm.send_email", "rule", 3)
    assert repeat["args"] == mail(*SAME)
    assert "- when:" in repeat["snippet"] and "eq: a@x.example" in repeat["snippet"]

    assert json.loads(dated.stdout)["cards"] == 4 and json.loads(future.stdout)["cards"] == 0
    assert json.loads(dated.stdout)["since"].startswith("2020-01-01T00:00:00")
    assert text.returncode == 0, text.stderr
    assert "approve rate 75%" in text.stdout
    assert "crm.send_email with the same arguments approved unchanged 3 of 3 times" in text.stdout
    assert "eq: a@x.example" in text.stdout and "policy: auto" in text.stdout
    assert wrong.returncode != 0 and "since" in wrong.stderr and "last tuesday" in wrong.stderr
    assert as_ann.status_code == 403

    admin, stats_page, ann_nav, ann_stats = pages
    assert 'href="/stats"' in admin
    assert "approved unchanged 3 of 3 times" in stats_page
    assert repeat["snippet"] in html.unescape(stats_page)
    assert "<b>75%</b>" in stats_page
    assert 'href="/stats"' not in ann_nav and ann_stats.status_code == 403


async def _pages(url: str, ann: str) -> tuple[str, str, str, httpx.Response]:
    """The inbox and Stats as the admin sees them; the inbox and Stats as ann does."""
    async with httpx.AsyncClient(base_url=url, follow_redirects=True) as browser:
        await browser.get(f"/login?token={TOKEN}")
        admin = (await browser.get("/")).text
        stats_page = (await browser.get("/stats?since=30d")).text
    async with httpx.AsyncClient(base_url=url, follow_redirects=True) as browser:
        await browser.get(f"/login?token={ann}")
        ann_nav = (await browser.get("/")).text
        ann_stats = await browser.get("/stats")
    return admin, stats_page, ann_nav, ann_stats


async def _in_a_browser(url: str, output_dir: Path) -> None:
    """The admin reaches Stats from the navigation; the page fits a phone's screen."""
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        try:
            context = await browser.new_context(viewport=DESKTOP, service_workers="block")
            page = await context.new_page()
            await page.goto(f"{url}/login?token={TOKEN}")
            await page.get_by_role("navigation").get_by_role("link", name="Stats").click()
            await expect(page.get_by_role("heading", level=1)).to_have_text("Stats")
            await expect(page.locator("pre.snippet")).to_contain_text("policy: auto")
            await shoot(page, output_dir / "web-stats")
        finally:
            await browser.close()
