"""Two server processes on one PostgreSQL database: exactly one runs the outbox, the
scheduler and the timers; kill it and the other takes over."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from tests.peers.server import ServerProcess

SINGLETONS = {"outbox", "schedules", "approval-timers"}


async def _leading(server: ServerProcess) -> set[str]:
    async with server.client() as c:
        status: dict[str, Any] = (await c.get("/api/status")).json()
    return set(status["leading"])


async def test_one_leader_among_two_servers_and_a_takeover(tmp_path: Path, pg_url: str) -> None:
    skills = tmp_path / "skills"
    skills.mkdir()
    env = {"PIZZABOT_DATABASE_URL": pg_url}
    a = ServerProcess(data_dir=tmp_path / "a", skills_dir=skills, env=env, args=["--no-worker"])
    b = ServerProcess(data_dir=tmp_path / "b", skills_dir=skills, env=env, args=["--no-worker"])
    await a.start()
    await b.start()
    try:
        for _ in range(100):
            la, lb = await _leading(a), await _leading(b)
            if la | lb >= SINGLETONS:
                break
            await asyncio.sleep(0.1)
        assert (la | lb) >= SINGLETONS and not (la & lb)
        leader, follower = (a, b) if "outbox" in la else (b, a)
        leader.kill()
        for _ in range(150):
            if await _leading(follower) >= SINGLETONS:
                break
            await asyncio.sleep(0.1)
        assert await _leading(follower) >= SINGLETONS
    finally:
        a.stop()
        b.stop()
