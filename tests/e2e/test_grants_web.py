"""Grants on the web page, end to end: the item page's "Approve, and don't ask again"
buttons and the Grants tab's Revoke, posted by a signed-in person to a real server whose
scripted model makes `crm.send_email` calls through the real MCP tool."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx

from tests.peers.grant_stories import asked, calls, calls_from_input, started
from tests.peers.server import TOKEN
from tests.peers.stack import Stack
from tests.peers.web import csrf_of


@asynccontextmanager
async def browser(st: Stack) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=st.server.url) as c:
        login = await c.get("/login", params={"token": TOKEN})
        assert login.status_code == 303, login.text
        yield c


def text(html: str) -> str:
    return " ".join(re.sub(r"<[^>]+>", " ", html).split())


async def click_grant(c: httpx.AsyncClient, item_id: str, grant: str) -> httpx.Response:
    """Press the item page's "Approve, and don't ask again …" button for `grant`."""
    page = (await c.get(f"/items/{item_id}")).text
    assert f'name="grant" value="{grant}"' in page, page
    return await c.post(
        f"/items/{item_id}",
        data={"csrf": csrf_of(page), "decision": "approve", "grant": grant},
    )


async def revoke_on_page(c: httpx.AsyncClient, grant_id: str) -> str:
    page = (await c.get("/grants")).text
    assert f'action="/grants/{grant_id}/revoke"' in page, page
    r = await c.post(f"/grants/{grant_id}/revoke", data={"csrf": csrf_of(page)})
    assert r.status_code == 303 and "flash=revoked" in r.headers["location"], r.text
    return (await c.get(r.headers["location"])).text


async def holding(st: Stack) -> list[dict[str, Any]]:
    async with st.client() as c:
        items: list[dict[str, Any]] = (await c.get("/api/grants")).json()["items"]
        return items


async def test_grant_from_the_item_page_and_revoke_it_on_the_grants_tab(tmp_path: Path) -> None:
    async with Stack(tmp_path, script=calls_from_input) as st, browser(st) as c:
        run = await st.start_run("test", calls(("a@x.example", "one")))
        item = await st.wait_item(run["id"], status="pending")
        page = text((await c.get(f"/items/{item['id']}")).text)
        assert "Approve, and don't ask again for send_email:" in page
        assert "for this run for 1h for these exact arguments" in page

        # A grant the card does not offer comes back on the page with a 422.
        html = (await c.get(f"/items/{item['id']}")).text
        r = await c.post(
            f"/items/{item['id']}",
            data={"csrf": csrf_of(html), "decision": "approve", "grant": "8h"},
        )
        assert r.status_code == 422 and "not offered" in r.text

        r = await click_grant(c, item["id"], "1h")
        assert r.status_code == 303 and "flash=approved" in r.headers["location"]
        await st.wait_run(run["id"], {"done"})
        (hourly,) = await holding(st)
        assert (hourly["granted_by"], hourly["granted_via"]) == ("owner", "web")

        # While it holds, another run's calls go ahead without a card.
        run = await st.start_run("test", calls(("b@x.example", "two")))
        run = await st.wait_run(run["id"], {"done", "waiting"})
        assert run["status"] == "done" and started(run)[0]["grant"] == hourly["id"]
        tab = text((await c.get("/grants")).text)
        assert "crm.send_email" in tab and "1h in skill test" in tab and "1×" in tab

        tab = text(await revoke_on_page(c, hourly["id"]))
        assert "Grant revoked" in tab and "No grant in force" in tab
        assert "revoked by owner" in tab

        # Revoked: the next call asks; approved for these exact arguments, then revoked.
        run = await st.start_run("test", calls(("c@x.example", "three")))
        item = await st.wait_item(run["id"], status="pending")
        await click_grant(c, item["id"], "exact")
        await st.wait_run(run["id"], {"done"})
        (exact,) = await holding(st)
        assert "these arguments, in skill test" in text((await c.get("/grants")).text)
        run = await st.start_run("test", calls(("c@x.example", "three")))
        run = await st.wait_run(run["id"], {"done", "waiting"})
        assert run["status"] == "done" and started(run)[0]["grant"] == exact["id"]
        await revoke_on_page(c, exact["id"])
        run = await st.start_run("test", calls(("c@x.example", "three"), ("d@x.example", "four")))
        item = await st.wait_item(run["id"], status="pending")

        # For this run: its next call of the tool needs no card.
        await click_grant(c, item["id"], "run")
        run = await st.wait_run(run["id"], {"done", "waiting"})
        assert run["status"] == "done" and asked(run) == ["three"]
        assert started(run)[1]["grant"] is not None
