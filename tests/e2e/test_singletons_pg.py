"""Two server processes on one PostgreSQL database: exactly one runs the outbox, the
scheduler and the timers; kill it and the other takes over."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.peers.server import ServerProcess
from tests.waiting import eventually

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

        async def both() -> tuple[set[str], set[str]] | None:
            la, lb = await _leading(a), await _leading(b)
            return (la, lb) if la | lb >= SINGLETONS else None

        la, lb = await eventually(
            both,
            what=f"the two servers to lead {sorted(SINGLETONS)}",
            interval=0.1,
            context=lambda: f"--- a ---\n{a.log()}\n--- b ---\n{b.log()}",
        )
        assert not (la & lb)
        leader, follower = (a, b) if "outbox" in la else (b, a)
        leader.kill()

        async def taken_over() -> bool:
            return await _leading(follower) >= SINGLETONS

        await eventually(
            taken_over,
            what=f"the other server to take over {sorted(SINGLETONS)}",
            interval=0.1,
            context=follower.log,
        )
    finally:
        a.stop()
        b.stop()
