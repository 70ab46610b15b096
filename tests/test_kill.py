"""The kill switch against a real server process, with a slow tool in flight."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

from pizzabot.agent.testing.scripts import last_tool_result
from tests.peers.stack import Reply, Stack, ToolCall
from tests.waiting import eventually


def slow_or_ask(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Reply:
    if last_tool_result(messages) is not None:
        return Reply(text=f"done: {last_tool_result(messages)}")
    task = next(m["content"] for m in messages if m["role"] == "user")
    if task == "ask":
        return Reply(
            tool_calls=[ToolCall("crm__send_email", {"to": "a@b.c", "subject": "s", "body": "b"})]
        )
    return Reply(tool_calls=[ToolCall("crm__slow", {"seconds": 120})])


async def _slow_started(st: Stack, n: int) -> None:
    await eventually(
        lambda: sum(c["tool"] == "slow" for c in st.tool_calls()) >= n,
        what=f"{n} slow tool calls to start",
        interval=0.1,
        context=st.server.log,
    )


async def test_kill_stops_running_runs_refuses_new_ones_and_survives_a_restart(
    tmp_path: Path,
) -> None:
    async with Stack(tmp_path, script=slow_or_ask) as st:
        waiting = await st.start_run("test", "ask")
        await st.wait_item(waiting["id"])
        running = [await st.start_run("test", "slow") for _ in range(2)]
        await _slow_started(st, 2)
        async with st.client() as c:
            r = await c.post("/api/kill")
            assert r.status_code == 200 and sorted(r.json()["killed"]) == sorted(
                x["id"] for x in running
            )
            killed_at = datetime.now().astimezone()
        for x in running:
            run = await st.wait_run(x["id"], {"killed"}, timeout=60)
            assert run["killed_by"] == "owner"
            # Ended by the kill, not by the tool: its call would have taken 120 s.
            finished = datetime.fromisoformat(run["finished_at"])
            assert (finished - killed_at).total_seconds() < 60
            assert not any(e["kind"] == "tool_result" for e in run["events"])
        assert (await st.get_run(waiting["id"]))["status"] == "waiting"  # waiting runs wait on

        async with st.client() as c:
            refused = await c.post("/api/runs", json={"skill": "test", "input": "slow"})
            assert refused.status_code == 409 and "kill switch" in refused.json()["detail"]
            assert (await c.get("/api/kill")).json()["on"] is True

        st.server.stop()
        await st.server.start()
        async with st.client() as c:
            assert (await c.get("/api/kill")).json()["on"] is True
            assert (
                await c.post("/api/runs", json={"skill": "test", "input": "x"})
            ).status_code == 409
            assert (await c.delete("/api/kill")).json() == {"on": False}
        item = await st.wait_item(waiting["id"])
        await st.decide(item["id"], "approve")
        await st.wait_run(waiting["id"], {"done"})
        again = await st.start_run("test", "ask")
        await st.wait_item(again["id"])
        async with st.client() as c:
            actions = [a["action"] for a in (await c.get("/api/audit")).json()["items"]]
        assert "kill" in actions and "kill_lifted" in actions and "decision" in actions
