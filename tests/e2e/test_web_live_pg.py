"""Two servers on one PostgreSQL database: a decision made through one answers the web page's
long-poll held by the other, woken by the database's announcement on the runs channel (the
servers' own polls are slowed to 30 s, and nothing of the web reads the database on a timer).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest
import yaml

from tests.conftest import fresh_pg_database
from tests.e2e.test_web_live import hold_all
from tests.peers.server import TOKEN, ServerProcess

pytestmark = pytest.mark.postgres

SKILL = {"name": "deploys", "tools": {"deploy.prod": "ask"}}


async def test_a_decision_in_another_server_shows_on_a_page_held_by_this_one(
    tmp_path: Path,
) -> None:
    skills = tmp_path / "skills"
    skills.mkdir()
    (skills / "deploys.yaml").write_text(yaml.safe_dump(SKILL))
    async with fresh_pg_database() as pg_url:
        env = {"PIZZABOT_DATABASE_URL": pg_url, "PIZZABOT_POLL_INTERVAL": "30"}
        first = ServerProcess(data_dir=tmp_path / "a", skills_dir=skills, env=env)
        second = ServerProcess(data_dir=tmp_path / "b", skills_dir=skills, env=env)
        await first.start()
        try:
            await second.start()
            try:
                await _decided_through_the_second(first, second)
            finally:
                second.stop()
        finally:
            first.stop()


async def _decided_through_the_second(first: ServerProcess, second: ServerProcess) -> None:
    async with (
        first.client() as a,
        second.client() as b,
        httpx.AsyncClient(base_url=first.url, timeout=60, follow_redirects=True) as page,
    ):
        r = await a.post(
            "/api/requests", json={"skill": "deploys", "title": "Deploy", "tool": "deploy.prod"}
        )
        assert r.status_code == 201, r.text
        item_id = r.json()["item_id"]
        assert (await page.get("/login", params={"token": TOKEN})).status_code == 200
        path = f"/items/{item_id}/state"
        shown = await page.get(path)
        assert 'data-version="pending"' in shown.text
        held = await hold_all(page, path, shown.headers["X-Live-Version"])

        decided = await b.post(f"/api/items/{item_id}/decision", json={"decision": "approve"})
        assert decided.status_code == 200, decided.text
        # Within the held asks' 25 s wait: the announcement woke them, not the wait's end.
        for answer in await asyncio.wait_for(asyncio.gather(*held), 20):
            assert answer.status_code == 200
            assert 'data-version="approved"' in answer.text
