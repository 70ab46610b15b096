"""A slow callback receiver holds only its own callbacks: against a real `pizzabot serve`
process, a receiver on loopback that drips its answers and another that answers at once
(`tests.peers.callbacks`), each its own origin.

A request's `callback_url` is its requester's choice, and the outbox holds a delivery up to
the per-attempt deadline. Callbacks go in sub-lanes by origin: at most
`PIZZABOT_OUTBOX_CONCURRENCY` under way per origin, so more slow callbacks than the whole
lane used to send at once are queued behind their own origin, and another origin's callbacks,
asked for after them, are delivered while the slow ones are still held.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
import yaml

from tests.peers.callbacks import CallbackPeer
from tests.peers.server import ServerProcess
from tests.peers.slack_api import SlackApi, http_mode_env
from tests.waiting import eventually

pytestmark = pytest.mark.asyncio(loop_scope="module")

SECRET = "one-secret-for-the-callbacks-0123456789"
#: Long, so a held callback is plainly still held when the other origin's arrive.
ATTEMPT_TIMEOUT = 60.0
CONCURRENCY = 2
POLL = 0.2

DEPLOYS = {
    "name": "deploys",
    "description": "approvals asked by the deploy agent",
    "callback_secret_env": "SHARED_SECRET",
    "approvers": {"slack": ["U1"]},
    "deliver": {"slack": "C123"},
    "tools": {"deploy.prod": {"policy": "ask", "impact": "high"}},
}


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def server(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[ServerProcess]:
    root = tmp_path_factory.mktemp("lanes")
    skills = root / "skills"
    skills.mkdir()
    (skills / "deploys.yaml").write_text(yaml.safe_dump(DEPLOYS))
    async with SlackApi() as slack:
        env = http_mode_env(
            slack.url,
            "8f742231b10e8888abcd99yyyzzz85a5",
            SHARED_SECRET=SECRET,
            PIZZABOT_POLL_INTERVAL=str(POLL),
            PIZZABOT_OUTBOX_ATTEMPT_TIMEOUT=str(ATTEMPT_TIMEOUT),
            PIZZABOT_OUTBOX_CONCURRENCY=str(CONCURRENCY),
        )
        proc = ServerProcess(
            data_dir=root / "data", skills_dir=skills, env=env, args=["--no-worker"]
        )
        await proc.start()
        try:
            yield proc
        finally:
            proc.stop()


async def decided_with_callback(server: ServerProcess, title: str, url: str) -> dict[str, Any]:
    """A request whose decision (a rejection) is due to be posted to `url`."""
    body = {
        "skill": "deploys",
        "title": title,
        "tool": "deploy.prod",
        "args": {"env": "prod", "version": title},
        "callback_url": url,
    }
    async with server.client() as c:
        r = await c.post("/api/requests", json=body)
        assert r.status_code == 201, r.text
        request: dict[str, Any] = r.json()
        r = await c.post(
            f"/api/items/{request['item_id']}/decision",
            json={"decision": "reject", "reason": "not today"},
        )
        assert r.status_code == 200, r.text
    return request


async def test_a_slow_receiver_holds_only_its_own_callbacks(server: ServerProcess) -> None:
    async with CallbackPeer(drip_every=0.5) as slow, CallbackPeer() as fast:
        # Twice as many slow callbacks as one origin may have under way, asked for first.
        for n in range(2 * CONCURRENCY + 1):
            await decided_with_callback(server, f"slow {n}", slow.url("drip"))
        await eventually(
            lambda: len(slow.connections_to("drip")) >= CONCURRENCY or None,
            what="the slow receiver's callbacks under way",
            timeout=30,
            context=server.log,
        )

        # Another origin's callbacks, asked for after them, go out beside them ...
        quick = [await decided_with_callback(server, f"fast {n}", fast.url("ok")) for n in range(3)]
        await eventually(
            lambda: len(fast.posts_to("ok")) >= len(quick) or None,
            what="the fast receiver's callbacks",
            timeout=ATTEMPT_TIMEOUT,
            context=server.log,
        )
        got = sorted(p.headers["idempotency-key"] for p in fast.posts_to("ok"))
        assert got == sorted(r["id"] for r in quick)

        # ... while the slow ones are still held, no more of them than one origin's share.
        held = slow.connections_to("drip")
        assert len(held) == CONCURRENCY
        assert all(c.closed is None for c in held)
