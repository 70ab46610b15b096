"""The web page shows the schedules with their next fire times (read-only)."""

from __future__ import annotations

from pathlib import Path

import httpx

from tests.peers.server import TOKEN
from tests.peers.stack import Reply, Stack, turns


async def test_the_schedules_page_lists_next_fire_times(tmp_path: Path) -> None:
    skill = {
        "schedules": [
            {"cron": "0 8 * * 1-5", "input": "morning digest", "timezone": "Europe/Amsterdam"}
        ]
    }
    async with Stack(tmp_path, script=turns(Reply(text="ok")), skill=skill) as st:
        async with httpx.AsyncClient(base_url=st.server.url, follow_redirects=True) as browser:
            assert "/login" in str((await browser.get("/schedules")).url)  # no session, no page
            await browser.get(f"/login?token={TOKEN}")
            page = (await browser.get("/schedules")).text
        async with st.client() as c:
            api = (await c.get("/api/schedules")).json()["items"]
    (schedule,) = api
    assert "morning digest" in page and "0 8 * * 1-5" in page and "Europe/Amsterdam" in page
    first = schedule["next_fire_times"][0]
    assert first[11:16] == "08:00" and first[:16].replace("T", " ") in page
