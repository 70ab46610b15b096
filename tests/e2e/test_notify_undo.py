"""Undo on a `notify` FYI, end to end: a real server whose scripted model adds a contact
through the "contacts" MCP server, the FYI it makes, and its Undo from the web page, the API
and the CLI: the compensating call runs once on the tool's server with the arguments filled
from the call and its answer, every copy says how it went, and a second Undo is refused."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx

from tests.e2e.test_cli import cli
from tests.e2e.test_rules import call_from_input, run_call
from tests.peers import mcp_contacts
from tests.peers.server import TOKEN
from tests.peers.stack import Stack
from tests.peers.web import csrf_of

ANN = "ann@example.com"


def contacts_skill(
    tools_log: Path, *, name: str = "test", undo_id: str = "{result.id}"
) -> dict[str, Any]:
    undo = {"tool": "contacts.delete_contact", "args": {"id": undo_id, "email": "{args.email}"}}
    return {
        "name": name,
        "mcp_servers": {"contacts": mcp_contacts.contacts_server(tools_log)},
        # The compensating tool asks; a person's click on Undo is its approval.
        "tools": {
            "contacts.add_contact": {"policy": "notify", "undo": undo},
            "contacts.delete_contact": "ask",
        },
        "approvers": {"slack": ["U1"], "email": ["ops@example.com"]},
    }


def deleted(st: Stack) -> list[dict[str, Any]]:
    return [c["args"] for c in st.tool_calls() if c["tool"] == "delete_contact"]


async def fyi_of(st: Stack, email: str, skill: str = "test") -> dict[str, Any]:
    """Add the contact through a run of `skill`, and return its FYI."""
    run = await run_call(st, "contacts__add_contact", {"email": email, "name": "Ann"}, skill)
    assert run["status"] == "done", run
    await st.wait_item(run["id"], box="unread")
    async with st.client() as c:
        unread = (await c.get("/api/inbox", params={"box": "unread"})).json()["items"]
    [fyi] = [i for i in unread if i["run_id"] == run["id"] and i["title"].startswith("FYI:")]
    return fyi


async def test_undo_on_the_web_page_runs_the_compensating_call_once(tmp_path: Path) -> None:
    async with Stack(
        tmp_path, script=call_from_input, skill=contacts_skill(tmp_path / "tools.jsonl")
    ) as st:
        fyi = await fyi_of(st, ANN)
        contact = mcp_contacts.contact_id(ANN)
        assert fyi["undo"]["state"] == "offered"
        assert fyi["undo"]["tool"] == "contacts.delete_contact"
        assert fyi["undo"]["args"] == {"id": contact, "email": ANN}
        assert deleted(st) == []

        async with httpx.AsyncClient(base_url=st.server.url, timeout=30) as web:
            assert (await web.get("/login", params={"token": TOKEN})).status_code == 303
            page = (await web.get(f"/items/{fyi['id']}")).text
            assert "Undo runs" in page and contact in page
            r = await web.post(f"/items/{fyi['id']}/undo", data={"csrf": csrf_of(page)})
            assert r.status_code == 303 and "flash=undone" in r.headers["location"], r.text
            page = " ".join((await web.get(f"/items/{fyi['id']}")).text.split())
            assert "Undone by" in page and f"deleted {contact}" in page
            assert "Undo runs" not in page
            # A second click is told it was undone already; nothing runs again.
            page = (await web.get(f"/items/{fyi['id']}")).text
            r = await web.post(f"/items/{fyi['id']}/undo", data={"csrf": csrf_of(page)})
            assert "flash=undone_before" in r.headers["location"]
        assert deleted(st) == [{"id": contact, "email": ANN}]

        async with st.client() as c:
            again = await c.post(f"/api/items/{fyi['id']}/undo")
            assert again.status_code == 409 and "already undone by" in again.json()["detail"]
            item = (await c.get(f"/api/items/{fyi['id']}")).json()
            audit = (await c.get("/api/audit")).json()["items"]
        assert item["undo"]["state"] == "done" and item["undo"]["via"] == "web"
        [undone] = [e for e in audit if e["action"] == "undone"]
        assert undone["item_id"] == fyi["id"] and undone["actor"] == item["undo"]["by"]
        assert undone["detail"]["ok"] is True
        assert deleted(st) == [{"id": contact, "email": ANN}]


async def test_undo_through_the_api_and_the_cli(tmp_path: Path) -> None:
    log = tmp_path / "tools.jsonl"
    oops = contacts_skill(log, name="oops", undo_id="c-nope")
    async with Stack(
        tmp_path, script=call_from_input, skill=contacts_skill(log), extra_skills=[oops]
    ) as st:
        fyi = await fyi_of(st, ANN)
        async with st.client() as c:
            # The kill switch refuses an Undo, and nothing runs.
            assert (await c.post("/api/kill", json={"reason": "test"})).status_code == 200
            r = await c.post(f"/api/items/{fyi['id']}/undo")
            assert r.status_code == 409 and "kill switch" in r.json()["detail"], r.text
            assert (await c.delete("/api/kill")).status_code == 200
            audit = (await c.get("/api/audit")).json()["items"]
        assert any(e["action"] == "undo_refused" for e in audit)
        assert deleted(st) == []

        shown = await asyncio.to_thread(cli, st, "item", fyi["id"])
        assert f"pizzabot undo {fyi['id']}" in shown.stdout, shown.stdout
        done = await asyncio.to_thread(cli, st, "undo", fyi["id"])
        assert done.returncode == 0, done.stderr
        assert "undone" in done.stdout and "deleted c-" in done.stdout
        again = await asyncio.to_thread(cli, st, "undo", fyi["id"])
        assert again.returncode != 0 and "already undone" in again.stderr + again.stdout
        assert len(deleted(st)) == 1

        # A compensating call that fails says so, with the tool's error, and is not retried.
        bad = await fyi_of(st, "bob@example.com", skill="oops")
        failed = await asyncio.to_thread(cli, st, "undo", bad["id"])
        assert failed.returncode == 1, failed.stderr
        assert "undo failed" in failed.stdout and "no contact c-nope" in failed.stdout
        async with st.client() as c:
            item = (await c.get(f"/api/items/{bad['id']}")).json()
            assert item["undo"]["state"] == "failed"
            assert "no contact c-nope" in item["undo"]["outcome"]
            assert (await c.post(f"/api/items/{bad['id']}/undo")).status_code == 409
        assert len(deleted(st)) == 1
