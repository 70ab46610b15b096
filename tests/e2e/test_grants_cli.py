"""Grants from the terminal: `pizzabot approve ITEM --grant …`, `pizzabot grants` and
`pizzabot revoke ID`, against a real server whose scripted model makes `crm.send_email`
calls through the real MCP tool."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from tests.e2e.test_cli import cli
from tests.peers.grant_stories import asked, calls, calls_from_input, sent, started
from tests.peers.stack import Stack


async def ask(st: Stack, *mails: tuple[str, str]) -> tuple[str, dict[str, Any]]:
    run = await st.start_run("test", calls(*mails))
    return run["id"], await st.wait_item(run["id"], status="pending")


async def term(st: Stack, *args: str) -> str:
    done = await asyncio.to_thread(cli, st, *args)
    assert done.returncode == 0, (args, done.stdout, done.stderr)
    return done.stdout


async def grant_ids(st: Stack) -> list[str]:
    async with st.client() as c:
        return [g["id"] for g in (await c.get("/api/grants")).json()["items"]]


async def test_approve_with_a_grant_list_and_revoke_from_the_terminal(tmp_path: Path) -> None:
    async with Stack(tmp_path, script=calls_from_input) as st:
        # A duration the tool does not offer is refused, and nothing is decided.
        run_id, item = await ask(st, ("a@x.example", "one"))
        refused = await asyncio.to_thread(cli, st, "approve", item["id"], "--grant", "8h")
        assert refused.returncode == 1 and "422" in refused.stderr, refused.stderr
        assert "not offered" in refused.stderr

        said = await term(st, "approve", item["id"], "--grant", "1h")
        assert "approved" in said and "granted 1h for crm.send_email" in said
        await st.wait_run(run_id, {"done"})
        (hourly,) = await grant_ids(st)

        # Another run of the skill: its calls run without asking while the grant holds.
        run = await st.start_run("test", calls(("b@x.example", "two"), ("c@x.example", "three")))
        run = await st.wait_run(run["id"], {"done", "waiting"})
        assert run["status"] == "done" and asked(run) == []
        assert [s["grant"] for s in started(run)] == [hourly, hourly]
        listing = await term(st, "grants")
        assert hourly in listing and "1h in skill test" in listing
        assert "owner via api" in listing

        said = await term(st, "revoke", hourly)
        assert f"{hourly}: revoked" in said
        assert "no grants in force" in (await term(st, "grants")).lower()

        # After the revoke a call asks; approving it for these exact arguments …
        run_id, item = await ask(st, ("d@x.example", "four"))
        await term(st, "approve", item["id"], "--grant", "exact")
        await st.wait_run(run_id, {"done"})
        (exact,) = await grant_ids(st)
        run = await st.start_run("test", calls(("d@x.example", "four")))
        run = await st.wait_run(run["id"], {"done", "waiting"})
        assert run["status"] == "done" and started(run)[0]["grant"] == exact
        # … lets only those arguments run, until it is revoked too.
        await term(st, "revoke", exact)
        run_id, item = await ask(st, ("d@x.example", "four"), ("e@x.example", "five"))
        assert item["args"]["subject"] == "four"

        # For this run: the rest of the run's calls of the tool go ahead.
        await term(st, "approve", item["id"], "--grant", "run")
        run = await st.wait_run(run_id, {"done", "waiting"})
        assert run["status"] == "done" and asked(run) == ["four"]
        assert sent(st.tool_calls())[-2:] == ["four", "five"]

        ended = await term(st, "grants", "--all")
        assert hourly in ended and exact in ended and "revoked by owner" in ended
