"""Two servers on one PostgreSQL database: a decision made through one answers a request's
long-poll held by the other at once, woken by the database's notification (not by reading
the database on a timer)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import yaml

from tests.conftest import fresh_pg_database
from tests.peers.server import ServerProcess

pytestmark = pytest.mark.postgres

SKILL = {"name": "deploys", "tools": {"deploy.prod": "ask"}}


async def test_a_decision_in_another_server_answers_the_long_poll(tmp_path: Path) -> None:
    skills = tmp_path / "skills"
    skills.mkdir()
    (skills / "deploys.yaml").write_text(yaml.safe_dump(SKILL))
    async with fresh_pg_database() as pg_url:
        # Slow polls everywhere: only the notification can wake the waiter in time.
        env = {"PIZZABOT_DATABASE_URL": pg_url, "PIZZABOT_POLL_INTERVAL": "30"}
        first = ServerProcess(data_dir=tmp_path / "a", skills_dir=skills, env=env)
        second = ServerProcess(data_dir=tmp_path / "b", skills_dir=skills, env=env)
        await first.start()
        try:
            await second.start()
            try:
                async with first.client() as a, second.client() as b:
                    r = await a.post(
                        "/api/requests",
                        json={"skill": "deploys", "title": "Deploy", "tool": "deploy.prod"},
                    )
                    assert r.status_code == 201, r.text
                    created = r.json()
                    waiting = asyncio.create_task(
                        a.get(f"/api/requests/{created['id']}", params={"wait": 60}, timeout=90)
                    )
                    # The other server sees the same request, still pending.
                    seen = (await b.get(f"/api/requests/{created['id']}")).json()
                    assert seen["status"] == "pending" and not waiting.done()
                    decided = await b.post(
                        f"/api/items/{created['item_id']}/decision", json={"decision": "approve"}
                    )
                    assert decided.status_code == 200, decided.text
                    # Well within the 60 s wait: the notification woke it, not the wait's end.
                    answer = await asyncio.wait_for(waiting, 30)
                    assert answer.status_code == 200, answer.text
                    assert answer.json()["status"] == "approved"
            finally:
                second.stop()
        finally:
            first.stop()
