"""A signed webhook request is accepted once by all the servers that share a database, against
two real `pizzabot serve` processes on one PostgreSQL database.

Replays are refused through a row per accepted signature, not through one process's memory:
a captured request sent to a second server behind the same load balancer starts nothing.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest_asyncio
import yaml

from tests.conftest import fresh_pg_database
from tests.peers.server import ServerProcess

SECRET = "shared-hook-secret-0815"
SKILL = {
    "name": "orders",
    "description": "started by a webhook",
    "instructions": "Note the order.",
    "model": "openai/none",
    "hooks": [{"name": "orders", "secret_env": "ORDERS_SECRET"}],
}


@pytest_asyncio.fixture
async def servers(tmp_path: Path) -> AsyncIterator[tuple[ServerProcess, ServerProcess]]:
    skills = tmp_path / "skills"
    skills.mkdir()
    (skills / "orders.yaml").write_text(yaml.safe_dump(SKILL))
    async with fresh_pg_database() as url:
        env = {"PIZZABOT_DATABASE_URL": url, "ORDERS_SECRET": SECRET}
        a = ServerProcess(data_dir=tmp_path / "a", skills_dir=skills, env=env, args=["--no-worker"])
        b = ServerProcess(data_dir=tmp_path / "b", skills_dir=skills, env=env, args=["--no-worker"])
        try:
            await a.start()
            await b.start()
            yield a, b
        finally:
            a.stop()
            b.stop()


def signed(body: bytes, key: str) -> dict[str, str]:
    stamp = str(int(time.time()))
    message = stamp.encode() + b"\n" + key.encode() + b"\n" + body
    mac = hmac.new(SECRET.encode(), message, hashlib.sha256).hexdigest()
    return {
        "Content-Type": "application/json",
        "X-Pizzabot-Timestamp": stamp,
        "X-Pizzabot-Signature": f"sha256={mac}",
        "Idempotency-Key": key,
    }


async def test_a_request_replayed_to_another_server_starts_nothing(
    servers: tuple[ServerProcess, ServerProcess],
) -> None:
    a, b = servers
    body = b'{"order": 99}'
    captured = signed(body, "order-99")
    answers = []
    for server in (a, b, a, b):
        async with httpx.AsyncClient(base_url=server.url, timeout=30) as c:
            answers.append(await c.post("/hooks/orders", content=body, headers=captured))
    assert [r.status_code for r in answers] == [202, 409, 409, 409], answers[1].text
    async with b.client() as c:
        runs: list[dict[str, Any]] = (await c.get("/api/runs")).json()["items"]
    assert [r["id"] for r in runs] == [answers[0].json()["run_id"]]
