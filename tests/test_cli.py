"""The CLI is a client of the API: the README's tour, typed in a terminal."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from pathlib import Path

from tests.peers.server import TOKEN
from tests.peers.stack import Stack
from tests.peers.stories import send_then_summarise


def cli(st: Stack, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PIZZABOT_URL": st.server.url,
        "PIZZABOT_API_TOKEN": TOKEN,
        "COLUMNS": "80",
    }
    return subprocess.run(
        [sys.executable, "-m", "pizzabot.bot.main", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


async def test_run_inbox_edit_and_show_from_the_terminal(tmp_path: Path) -> None:
    async with Stack(tmp_path, script=send_then_summarise) as st:
        started = await asyncio.to_thread(cli, st, "run", "test", "send Ann the quote")
        assert started.returncode == 0, started.stderr
        run_id = re.search(r"run (\w+) queued", started.stdout).group(1)  # type: ignore[union-attr]
        item = await st.wait_item(run_id)
        listing = await asyncio.to_thread(cli, st, "inbox", "--box", "action")
        assert item["id"] in listing.stdout  # full ids, so they can be typed back
        refused = await asyncio.to_thread(cli, st, "edit", item["id"], "--set", "copies=50")
        assert (
            refused.returncode == 1
            and "copies" in refused.stderr
            and "at most 10" in refused.stderr
        )
        edited = await asyncio.to_thread(
            cli, st, "edit", item["id"], "--set", "copies=3", "--set", "priority=high"
        )
        assert edited.returncode == 0 and "edited" in edited.stdout, edited.stderr
        await st.wait_run(run_id, {"done"})
        shown = await asyncio.to_thread(cli, st, "show", run_id)
        assert "done" in shown.stdout and "tool_result" in shown.stdout
        again = await asyncio.to_thread(cli, st, "approve", item["id"])
        assert (
            again.returncode == 1
            and "409" in again.stderr
            and "already edited by owner" in again.stderr
        )
        wrong = subprocess.run(
            [sys.executable, "-m", "pizzabot.bot.main", "runs"],
            capture_output=True,
            text=True,
            env={**os.environ, "PIZZABOT_URL": st.server.url, "PIZZABOT_API_TOKEN": "nope"},
        )
        assert wrong.returncode == 1 and "401" in wrong.stderr
