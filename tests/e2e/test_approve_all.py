"""Approve all through the API and the CLI: the model asks for three calls in one reply, all
three come to the inbox at once, and one "approve all" approves the two mails, each decided
and audited on its own, while the lookup, which needs two people, is left out and said so.
Against a real server whose scripted model calls the real test MCP tools."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import httpx

from tests.e2e.test_cli import cli
from tests.peers.batch_stories import TWO_FOR_LOOKUP, pending_of, three_at_once
from tests.peers.server import TOKEN
from tests.peers.stack import Stack
from tests.peers.web import csrf_of
from tests.waiting import eventually


async def three_waiting(st: Stack) -> tuple[str, list[dict[str, Any]]]:
    run = await st.start_run("test", "mail two customers and look Ada up")
    await st.wait_item(run["id"], status="pending", count=3)
    await st.wait_run(run["id"], {"waiting"})
    async with st.client() as c:
        items = (await c.get("/api/inbox", params={"box": "action"})).json()["items"]
    return run["id"], pending_of(items, run["id"])


def batch_seen(page: str) -> list[str]:
    """The "Approve all" form's `seen` fields, "item id:digest" each."""
    return [v for v in re.findall(r'name="seen" value="([^"]*)"', page) if ":" in v]


def sent_subjects(st: Stack) -> list[str]:
    return [c["args"]["subject"] for c in st.tool_calls() if c["tool"] == "send_email"]


async def test_approve_all_by_api_approves_each_call_and_leaves_out_the_two_person_one(
    tmp_path: Path,
) -> None:
    async with Stack(tmp_path, script=three_at_once, skill=TWO_FOR_LOOKUP) as st:
        run_id, pending = await three_waiting(st)
        # The turn's three questions are in the inbox together, before anyone decided.
        tools = sorted(i["tool"] for i in pending)
        assert tools == ["crm.lookup", "crm.send_email", "crm.send_email"]
        assert st.tool_calls() == []

        async with st.client() as c:
            r = await c.post(
                f"/api/runs/{run_id}/decisions", json={"decision": "approve", "all": True}
            )
            assert r.status_code == 200, r.text
            answer = r.json()
            results = answer["results"]
            assert [(x["item"]["tool"], x["approved"]) for x in results] == [
                ("crm.send_email", True),
                ("crm.send_email", True),
                ("crm.lookup", False),
            ]
            assert [x["item"]["status"] for x in results[:2]] == ["approved", "approved"]
            assert results[2]["why"] == "needs 2 approvals: approve it on its own card"
            assert results[2]["item"]["status"] == "pending"
            assert (
                "Approved 2 of 3" in answer["summary"]
                and "Left out crm.lookup" in answer["summary"]
            )

            # The two mails went out, in the model's order; the lookup waits for two people.
            run = await st.wait_run(run_id, {"waiting"})
            assert await _eventually_sent(st, 2) == ["one", "two"]
            assert not any(c["tool"] == "lookup" for c in st.tool_calls())

            # Each call was decided and audited on its own.
            decided = [e["data"]["item_id"] for e in run["events"] if e["kind"] == "decision"]
            assert decided == [results[0]["item"]["id"], results[1]["item"]["id"]]
            audit = (await c.get("/api/audit")).json()["items"]
            audited = [a["item_id"] for a in audit if a["action"] == "decision"]
            assert sorted(audited) == sorted(decided)

            # Nothing is left to approve in a batch but the left-out call; asking again
            # approves nothing and says so again.
            again = await c.post(
                f"/api/runs/{run_id}/decisions", json={"decision": "approve", "all": True}
            )
            assert [x["approved"] for x in again.json()["results"]] == [False]

            # Only approving goes in a batch, and only for a run that exists.
            r = await c.post(
                f"/api/runs/{run_id}/decisions", json={"decision": "reject", "all": True}
            )
            assert r.status_code == 422
            r = await c.post("/api/runs/nope/decisions", json={"decision": "approve", "all": True})
            assert r.status_code == 404

            # The left-out call is still decided on its own card.
            r = await st.decide(results[2]["item"]["id"], "reject", reason="not now")
            assert r.status_code == 200, r.text
        run = await st.wait_run(run_id, {"done"})
        assert run["result"] == "got 3 results"


async def test_approve_all_from_the_terminal(tmp_path: Path) -> None:
    async with Stack(tmp_path, script=three_at_once, skill=TWO_FOR_LOOKUP) as st:
        run_id, _ = await three_waiting(st)
        done = await asyncio.to_thread(cli, st, "approve", "--run", run_id, "--all")
        assert done.returncode == 0, (done.stdout, done.stderr)
        lines = done.stdout.strip().splitlines()
        assert len(lines) == 3, done.stdout
        assert lines[0].endswith("crm.send_email: approved")
        assert lines[1].endswith("crm.send_email: approved")
        assert lines[2].endswith(
            "crm.lookup: left out: needs 2 approvals: approve it on its own card"
        )
        assert await _eventually_sent(st, 2) == ["one", "two"]

        # Half a batch is refused before anything is sent.
        bad = await asyncio.to_thread(cli, st, "approve", "--all")
        assert bad.returncode == 2 and "--run RUN --all" in bad.stderr


async def _eventually_sent(st: Stack, n: int) -> list[str]:
    async def enough() -> list[str] | None:
        got = sent_subjects(st)
        return got if len(got) >= n else None

    return await eventually(enough, what=f"{n} mails sent", timeout=30, interval=0.1)


async def test_approve_all_on_the_web_page(tmp_path: Path) -> None:
    async with Stack(tmp_path, script=three_at_once, skill=TWO_FOR_LOOKUP) as st:
        run_id, pending = await three_waiting(st)
        first = next(i for i in pending if i["tool"] == "crm.send_email")
        lookup = next(i for i in pending if i["tool"] == "crm.lookup")
        async with httpx.AsyncClient(base_url=st.server.url, follow_redirects=True) as web:
            assert (await web.get("/login", params={"token": TOKEN})).status_code == 200
            card = (await web.get(f"/items/{first['id']}")).text
            assert "Approve all (3)" in card

            form = {"csrf": csrf_of(card), "seen": batch_seen(card)}
            assert len(form["seen"]) == 3  # the digest of each call's card, as drawn
            r = await web.post(f"/runs/{run_id}/approve-all", data=form)
            assert r.status_code == 200, r.text
            said = " ".join(r.text.split())
            assert "Approved 2 of 3 calls" in said
            assert "crm.lookup</a>: left out: needs 2 approvals: approve it on its own card" in said
            assert said.count(": approved") == 2
            assert await _eventually_sent(st, 2) == ["one", "two"]

            # The one left is decided on its own card: there is no batch of one.
            left = (await web.get(f"/items/{lookup['id']}")).text
            assert "Approve all" not in left

            # Without the page's CSRF token nothing is approved.
            refused = await web.post(f"/runs/{run_id}/approve-all", data={})
            assert refused.status_code in (400, 403)
