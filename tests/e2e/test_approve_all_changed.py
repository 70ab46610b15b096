"""Approve all counts only for the calls as their cards showed them: the model asks for three
calls in one reply (two mails and a lookup that needs two people), someone edits the lookup
after the batch card was drawn, and "approve all" from that card approves the mails and
leaves the lookup out ("this card changed"), counting nothing toward it. Through the API
(each call's digest, or the turn's one digest) and the web page, against a real server whose
scripted model calls the real test MCP tools."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from tests.e2e.test_approve_all import _eventually_sent, batch_seen, three_waiting
from tests.peers.batch_stories import TWO_FOR_LOOKUP, three_at_once
from tests.peers.server import TOKEN
from tests.peers.stack import Stack
from tests.peers.web import csrf_of

BEA = {"query": "Bea"}


async def edit_lookup(st: Stack, pending: list[dict[str, Any]]) -> dict[str, Any]:
    """The lookup edited by one of its two approvers: it waits, at a new version."""
    lookup = next(i for i in pending if i["tool"] == "crm.lookup")
    r = await st.decide(lookup["id"], "edit", args=BEA)
    assert r.status_code == 200, r.text
    edited: dict[str, Any] = r.json()
    assert edited["status"] == "pending" and edited["version"] > lookup["version"]
    return edited


async def test_approve_all_by_api_leaves_out_a_call_edited_since_it_was_read(
    tmp_path: Path,
) -> None:
    async with Stack(tmp_path, script=three_at_once, skill=TWO_FOR_LOOKUP) as st:
        run_id, pending = await three_waiting(st)
        path = f"/api/runs/{run_id}/decisions"
        async with st.client() as c:
            turn = (await c.get(path)).json()
            assert [i["tool"] for i in turn["items"]] == [
                "crm.send_email",
                "crm.send_email",
                "crm.lookup",
            ]
            seen = {i["id"]: i["digest"] for i in turn["items"]}
            lookup = await edit_lookup(st, pending)

            # The turn's one digest no longer matches: no call can be told apart, none goes.
            whole = await c.post(
                path, json={"decision": "approve", "all": True, "seen": turn["digest"]}
            )
            assert whole.status_code == 200, whole.text
            results = whole.json()["results"]
            assert [x["approved"] for x in results] == [False, False, False]
            assert all("this card changed" in x["why"] for x in results)
            assert sent_now(st) == []

            # Each call's digest: the mails go, the edited lookup is left out, uncounted.
            each = await c.post(path, json={"decision": "approve", "all": True, "seen": seen})
            assert each.status_code == 200, each.text
            results = each.json()["results"]
            assert [(x["item"]["tool"], x["approved"]) for x in results] == [
                ("crm.send_email", True),
                ("crm.send_email", True),
                ("crm.lookup", False),
            ]
            assert results[2]["why"].startswith("this card changed after you saw it")
            now = (await c.get(f"/api/items/{lookup['id']}")).json()
            assert (now["status"], now["args"]) == ("pending", BEA)
            assert now["risk"]["approved"] == lookup["risk"]["approved"]
            assert await _eventually_sent(st, 2) == ["one", "two"]

            # What is not a digest is refused before anything is read.
            bad = await c.post(path, json={"decision": "approve", "all": True, "seen": "zz"})
            assert bad.status_code == 422


async def test_approve_all_on_the_web_leaves_out_a_call_edited_after_the_page(
    tmp_path: Path,
) -> None:
    async with Stack(tmp_path, script=three_at_once, skill=TWO_FOR_LOOKUP) as st:
        run_id, pending = await three_waiting(st)
        first = next(i for i in pending if i["tool"] == "crm.send_email")
        async with httpx.AsyncClient(base_url=st.server.url, follow_redirects=True) as web:
            assert (await web.get("/login", params={"token": TOKEN})).status_code == 200
            card = (await web.get(f"/items/{first['id']}")).text
            assert "Approve all (3)" in card
            await edit_lookup(st, pending)

            # A form that names no call (a page from before the digests) approves none.
            bare = await web.post(f"/runs/{run_id}/approve-all", data={"csrf": csrf_of(card)})
            said = " ".join(bare.text.split())
            assert "Approved 0 of 3" in said and said.count("it did not show this call") == 3

            form = {"csrf": csrf_of(card), "seen": batch_seen(card)}
            r = await web.post(f"/runs/{run_id}/approve-all", data=form)
            assert r.status_code == 200, r.text
            said = " ".join(r.text.split())
            assert "Approved 2 of 3 calls" in said
            assert "crm.lookup</a>: left out: this card changed after you saw it" in said
            assert await _eventually_sent(st, 2) == ["one", "two"]


def sent_now(st: Stack) -> list[str]:
    return [c["args"]["subject"] for c in st.tool_calls() if c["tool"] == "send_email"]
