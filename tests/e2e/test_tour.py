"""The README's five-minute tour, as written: the shipped `demo` skill on its offline model
and its pretend outbox, driven by the CLI against a served bot started outside the checkout
(so the demo's tool server is found as an installed module, not as a file beside it)."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.peers.server import TOKEN, ServerProcess
from tests.waiting import eventually

ROOT = Path(__file__).resolve().parents[2]


def pizzabot(server: ServerProcess, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PIZZABOT_URL": server.url, "PIZZABOT_API_TOKEN": TOKEN, "COLUMNS": "120"}
    return subprocess.run(
        [sys.executable, "-m", "pizzabot.bot.main", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


async def _get(server: ServerProcess, path: str, **params: Any) -> Any:
    async with server.client() as c:
        r = await c.get(path, params=params)
        r.raise_for_status()
        return r.json()


async def test_the_readme_tour_on_the_demo_skill(tmp_path: Path) -> None:
    skills = tmp_path / "skills"
    skills.mkdir()
    shutil.copy(ROOT / "manifests" / "skills" / "demo.yaml", skills)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    server = ServerProcess(data_dir=tmp_path / "data", skills_dir=skills, cwd=elsewhere)
    await server.start()
    try:
        started = await asyncio.to_thread(
            pizzabot, server, "run", "demo", "invite the team to pizza friday"
        )
        assert started.returncode == 0, started.stderr
        run_id = re.search(r"run (\w+) queued", started.stdout).group(1)  # type: ignore[union-attr]

        async def action() -> dict[str, Any] | None:
            items = (await _get(server, "/api/inbox", box="action"))["items"]
            return next((i for i in items if i["run_id"] == run_id), None)

        item = await eventually(
            action, what="the demo's Action card", timeout=120, context=server.log
        )
        assert item["tool"] == "demo.send_email"
        listing = await asyncio.to_thread(pizzabot, server, "inbox")
        assert item["id"] in listing.stdout

        refused = await asyncio.to_thread(pizzabot, server, "edit", item["id"], "--set", "copies=9")
        assert (
            refused.returncode == 1 and "copies" in refused.stderr and "at most 5" in refused.stderr
        )
        edited = await asyncio.to_thread(
            pizzabot, server, "edit", item["id"], "--set", "copies=3", "--set", "tone=formal"
        )
        assert edited.returncode == 0, edited.stderr

        async def done() -> dict[str, Any] | None:
            run = await _get(server, f"/api/runs/{run_id}")
            return run if run["status"] in {"done", "failed"} else None

        run = await eventually(done, what="the demo run to finish", timeout=120, context=server.log)
        assert run["status"] == "done", run
        results = [e for e in run["events"] if e["kind"] == "tool_result"]
        assert "would have sent 3 formal email(s)" in str(results[-1]["data"])
        unread = await asyncio.to_thread(pizzabot, server, "inbox", "--box", "unread")
        assert unread.returncode == 0 and run_id[:8] in unread.stdout
        shown = await asyncio.to_thread(pizzabot, server, "show", run_id)
        assert shown.returncode == 0, shown.stderr
        assert "Edited and approved by owner" in shown.stdout
        assert "copies: 1 → 3" in shown.stdout
    finally:
        server.stop()
