"""Grants through the HTTP API, end to end: a real server, the scripted model making
`crm.send_email` calls through the real MCP tool, and an approver saying "approve, and don't
ask again for this run / for an hour / for these exact arguments" — until the grant is
revoked."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

import httpx

from tests.peers.grant_stories import asked, calls, calls_from_input, sent, started
from tests.peers.stack import Stack
from tests.waiting import eventually


async def approve(st: Stack, item_id: str, grant: str | None = None) -> httpx.Response:
    body: dict[str, Any] = {"decision": "approve"}
    if grant is not None:
        body["grant"] = grant
    async with st.client() as c:
        return await c.post(f"/api/items/{item_id}/decision", json=body)


async def grants(st: Stack, **params: str) -> list[dict[str, Any]]:
    async with st.client() as c:
        r = await c.get("/api/grants", params=params)
        assert r.status_code == 200, r.text
        items: list[dict[str, Any]] = r.json()["items"]
        return items


async def revoke(st: Stack, grant_id: str) -> dict[str, Any]:
    async with st.client() as c:
        r = await c.delete(f"/api/grants/{grant_id}")
        assert r.status_code == 200, r.text
        data: dict[str, Any] = r.json()
        return data


async def audit(st: Stack) -> list[dict[str, Any]]:
    async with st.client() as c:
        items: list[dict[str, Any]] = (await c.get("/api/audit")).json()["items"]
        return items


async def first_ask(st: Stack, text: str) -> tuple[str, dict[str, Any]]:
    """Start a run and return it with the item of its first call."""
    run = await st.start_run("test", text)
    return run["id"], await st.wait_item(run["id"], status="pending")


async def test_a_grant_for_this_run_lets_the_next_calls_run_until_it_is_revoked(
    tmp_path: Path,
) -> None:
    async with Stack(tmp_path, script=calls_from_input) as st:
        run_id, item = await first_ask(
            st, calls(("a@x.example", "one"), ("b@x.example", "two"), ("c@x.example", "three"))
        )
        # The card offers the tool's grants: by default this run, an hour, these arguments.
        assert item["grants"] == ["run", "1h", "exact"]
        r = await approve(st, item["id"], "run")
        assert r.status_code == 200, r.text

        # The second call runs without asking; the third too, while the grant holds.
        run = await st.wait_run(run_id, {"done", "waiting"})
        assert run["status"] == "done", run
        assert asked(run) == ["one"]
        assert sent(st.tool_calls()) == ["one", "two", "three"]
        assert await grants(st) == []  # a run grant ends with its run
        (grant,) = await grants(st, all="true")
        assert (grant["choice"], grant["scope"], grant["run_id"]) == ("run", "run", run_id)
        assert (grant["granted_by"], grant["granted_via"], grant["uses"]) == ("owner", "api", 2)
        assert [s.get("grant") for s in started(run)] == [None, grant["id"], grant["id"]]
        actions = [e["action"] for e in await audit(st)]
        assert actions.count("grant used") == 2 and "grant created" in actions

        # A run grant covers nothing outside its run: another run asks.
        other_id, other = await first_ask(st, calls(("d@x.example", "four")))
        assert other["status"] == "pending"
        assert (await approve(st, other["id"])).status_code == 200
        await st.wait_run(other_id, {"done"})

        # Revoked in a run that goes on: its next call asks again.
        run_id, item = await first_ask(
            st, calls(("a@x.example", "five"), ("b@x.example", "six"), ("c@x.example", "seven"))
        )
        assert (await approve(st, item["id"], "run")).status_code == 200
        (grant,) = await eventually(
            lambda: _listed(st, run_id), what="the run's grant to be listed"
        )
        revoked = await revoke(st, grant["id"])
        assert revoked["revoked_by"] == "owner"
        revoked_at = datetime.fromisoformat(revoked["revoked_at"])
        # The run goes on meanwhile: the grant covers the calls that started before the revoke,
        # and none after it; a call that comes after the revoke is asked about.
        run = await st.wait_run(run_id, {"done", "waiting"})
        for event in run["events"]:
            if event["kind"] == "tool_started" and event["data"].get("grant") == grant["id"]:
                assert datetime.fromisoformat(event["at"]) <= revoked_at, event
        if run["status"] == "waiting":
            assert asked(run)[-1] in {"six", "seven"}
            assert (await st.wait_item(run_id, status="pending"))["status"] == "pending"
        else:
            assert sent(st.tool_calls())[-3:] == ["five", "six", "seven"]
        assert "grant revoked" in [e["action"] for e in await audit(st)]
        assert await _listed(st, run_id) is None
        assert [g["id"] for g in await grants(st, all="true") if g["revoked_at"]] == [grant["id"]]


async def _listed(st: Stack, run_id: str) -> list[dict[str, Any]] | None:
    found = [g for g in await grants(st) if g["run_id"] == run_id]
    return found or None


async def test_exact_and_hourly_grants_cover_later_runs_of_the_skill_until_revoked(
    tmp_path: Path,
) -> None:
    async with Stack(tmp_path, script=calls_from_input) as st:
        # "exact": these arguments, in any run of this skill.
        run_id, item = await first_ask(st, calls(("a@x.example", "same")))
        assert (await approve(st, item["id"], "exact")).status_code == 200
        await st.wait_run(run_id, {"done"})
        (exact,) = await grants(st)
        assert exact["scope"] == "exact" and exact["args"]["subject"] == "same"
        assert exact["expires_at"] is None and len(exact["fingerprint"]) == 64

        run = await st.start_run("test", calls(("a@x.example", "same"), ("a@x.example", "new")))
        item = await st.wait_item(run["id"], status="pending")
        assert item["args"]["subject"] == "new"  # the same arguments ran; others ask
        assert sent(st.tool_calls()) == ["same", "same"]
        assert (await approve(st, item["id"])).status_code == 200
        await st.wait_run(run["id"], {"done"})

        await revoke(st, exact["id"])
        run_id, item = await first_ask(st, calls(("a@x.example", "same")))
        assert item["args"]["subject"] == "same"
        assert (await approve(st, item["id"], "1h")).status_code == 200
        await st.wait_run(run_id, {"done"})

        # "1h": any arguments, in any run of this skill, for the hour.
        hourly = next(g for g in await grants(st) if g["choice"] == "1h")
        assert hourly["expires_at"] is not None
        run = await st.start_run("test", calls(("z@x.example", "other"), ("y@x.example", "more")))
        run = await st.wait_run(run["id"], {"done", "waiting"})
        assert run["status"] == "done" and asked(run) == []
        assert [s["grant"] for s in started(run)] == [hourly["id"], hourly["id"]]

        await revoke(st, hourly["id"])
        run_id, item = await first_ask(st, calls(("z@x.example", "other")))
        assert item["status"] == "pending"
        assert await grants(st) == []


async def test_a_grant_the_tool_does_not_offer_is_refused(tmp_path: Path) -> None:
    skill = {
        "tools": {
            "crm.send_email": {"policy": "ask", "grants": ["run", "8h"]},
            "crm.lookup": {"policy": "ask", "grants": []},
        }
    }
    async with Stack(tmp_path, script=calls_from_input, skill=skill) as st:
        run_id, item = await first_ask(st, calls(("a@x.example", "one"), ("b@x.example", "two")))
        assert item["grants"] == ["run", "8h"]
        for body in (
            {"decision": "approve", "grant": "1h"},  # a duration the tool does not offer
            {"decision": "approve", "grant": "exact"},
            {"decision": "approve", "grant": "forever"},
            {"decision": "reject", "grant": "run"},  # a grant goes only with approve
            {"decision": "edit", "args": item["args"], "grant": "run"},
        ):
            async with st.client() as c:
                r = await c.post(f"/api/items/{item['id']}/decision", json=body)
            assert r.status_code == 422, (body, r.text)
            assert "grant" in r.json()["detail"]["errors"], r.text
        assert (await st.get_run(run_id))["status"] == "waiting"  # nothing was decided
        assert await grants(st, all="true") == []

        r = await approve(st, item["id"], "8h")
        assert r.status_code == 200, r.text
        run = await st.wait_run(run_id, {"done", "waiting"})
        assert run["status"] == "done" and asked(run) == ["one"]
        (grant,) = await grants(st)
        assert grant["choice"] == "8h"


async def test_a_grant_never_overrides_a_rule_that_denies(tmp_path: Path) -> None:
    rules = {
        "policy": "ask",
        "rules": [
            {
                "when": {"to": {"matches": ".*@rival\\.example"}},
                "policy": "deny",
                "reason": "never mail the rival",
            }
        ],
    }
    async with Stack(
        tmp_path, script=calls_from_input, skill={"tools": {"crm.send_email": rules}}
    ) as st:
        run_id, item = await first_ask(st, calls(("a@x.example", "one")))
        assert (await approve(st, item["id"], "1h")).status_code == 200
        await st.wait_run(run_id, {"done"})
        assert len(await grants(st)) == 1

        run = await st.start_run(
            "test", calls(("ceo@rival.example", "deal"), ("b@x.example", "ok"))
        )
        run = await st.wait_run(run["id"], {"done", "waiting"})
        assert run["status"] == "done" and asked(run) == []
        assert "deal" not in sent(st.tool_calls())  # denied, grant or not
        assert sent(st.tool_calls()) == ["one", "ok"]
        result = next(e["data"] for e in run["events"] if e["kind"] == "tool_result")
        assert result["denied_by"] == "rule 1 of crm.send_email"
