"""The schedules API and the `pizzabot schedules` commands against a real server process,
whose APScheduler really fires."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

from tests.peers.server import TOKEN
from tests.peers.stack import Reply, Stack, turns
from tests.waiting import eventually

MORNING = {"cron": "0 8 * * 1-5", "input": "morning report", "timezone": "Europe/Amsterdam"}


async def cli(st: Stack, *args: str) -> tuple[int, str]:
    env = {
        **os.environ,
        "COLUMNS": "250",
        "PIZZABOT_URL": st.server.url,
        "PIZZABOT_API_TOKEN": TOKEN,
    }
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "pizzabot.bot.main",
        *args,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await proc.communicate()
    return proc.returncode or 0, out.decode()


async def test_schedules_through_the_api_and_the_cli(tmp_path: Path) -> None:
    skill = {"schedules": [MORNING]}
    async with Stack(tmp_path, script=turns(Reply(text="reported")), skill=skill) as st:
        async with st.server.client(token=None) as anonymous:
            assert (await anonymous.get("/api/schedules")).status_code == 401
        async with st.client() as c:
            listed = (await c.get("/api/schedules")).json()
            [morning] = listed["items"]
            assert morning["source"] == "skill" and morning["cron"] == MORNING["cron"]
            assert len(morning["next_fire_times"]) == 3
            assert all(
                t.endswith(("+01:00", "+02:00")) and "T08:00:00" in t
                for t in morning["next_fire_times"]
            )
            assert (await c.delete(f"/api/schedules/{morning['id']}")).status_code == 409

            bad = await c.post("/api/schedules", json={"skill": "test", "cron": "0 8 * *"})
            assert bad.status_code == 422 and "5" in bad.text
            unknown = await c.post("/api/schedules", json={"skill": "nope", "every": "1h"})
            assert unknown.status_code == 404

            # A schedule every second: the server's APScheduler fires it, each fire one run.
            r = await c.post(
                "/api/schedules", json={"skill": "test", "every": "1s", "input": "tick"}
            )
            assert r.status_code == 201, r.text
            sid = r.json()["id"]

            async def fired() -> dict[str, Any] | None:
                shown: dict[str, Any] = (await c.get(f"/api/schedules/{sid}")).json()
                last = shown["last_fire"]
                return shown if last and last["status"] == "started" else None

            shown = await eventually(
                fired,
                what=f"schedule {sid} to fire and start a run",
                interval=0.2,
                context=st.server.log,
            )
            paused = (await c.post(f"/api/schedules/{sid}/pause")).json()
            assert paused["paused"] is True and paused["next_fire_times"] == []
            run = await st.get_run(shown["last_fire"]["run_id"])
            assert run["trigger"] == f"schedule:{sid}" and run["input"] == "tick"
            runs = (await c.get("/api/runs")).json()["items"]
            fires = (await c.get(f"/api/schedules/{sid}")).json()["fires"]
            assert len(runs) <= len(fires)  # a fire may still be in flight
            assert (await c.delete(f"/api/schedules/{sid}")).json() == {"deleted": sid}

        code, out = await cli(st, "schedules")
        assert code == 0 and morning["id"] in out and "0 8 * * 1-5" in out, out
        code, out = await cli(
            st,
            "schedules",
            "add",
            "test",
            "weekly digest",
            "--cron",
            "0 9 * * 1",
            "--timezone",
            "Europe/Amsterdam",
            "--misfire",
            "run_once",
        )
        assert code == 0 and "weekly digest" not in out and "0 9 * * 1" in out, out
        new_id = out.split()[0]
        code, out = await cli(st, "schedules", "pause", new_id)
        assert code == 0 and "paused" in out, out
        code, out = await cli(st, "schedules", "resume", new_id)
        assert code == 0 and "next: 20" in out, out
        code, out = await cli(st, "schedules", "remove", new_id)
        assert code == 0 and "removed" in out, out
        code, out = await cli(st, "schedules", "remove", morning["id"])
        assert code == 1 and "409" in out and "remove it there" in out, out
