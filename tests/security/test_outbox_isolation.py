"""One callback receiver cannot stop, slow or swell the outbox, nor start a run with what it
captured; against a real `pizzabot serve` process, a local Slack recorder and a hostile
callback receiver on loopback (`tests.peers.callbacks`).

A request's `callback_url` is its requester's choice. An answer of 503 with `Retry-After:
99999999999999` overflowed the retry arithmetic and stopped every delivery on every channel;
an answer dripped a byte at a time held every card for as long as it dripped; an answer of
many megabytes was read whole into memory; and a captured callback, signed like a webhook,
started a run where one secret served both. Here, while the hostile receiver misbehaves,
another request's callback and another request's Slack card still arrive within a bound
taken from the server's settings; the hostile delivery is tried at the ceiling's pace and
then given up (a dead letter in `/api/status` and the audit trail); the server hangs up on a
huge answer after a few megabytes at most; and a replayed callback is refused as a webhook.
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json
import re
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio
import yaml

from tests.peers.callbacks import CallbackPeer
from tests.peers.server import ServerProcess
from tests.peers.slack_api import SlackApi, http_mode_env
from tests.waiting import eventually

pytestmark = pytest.mark.asyncio(loop_scope="module")

SECRET = "one-secret-for-callbacks-and-hooks-0123"
HOOK = "deploy-events"
DOCS = Path(__file__).resolve().parents[2] / "docs" / "api.md"

# The server's outbox limits, small so a test takes seconds.
ATTEMPT_TIMEOUT = 2.0
CONCURRENCY = 2
MAX_ATTEMPTS = 3
RETRY_AFTER_MAX = 2.0
POLL = 0.2
#: How soon a healthy delivery must arrive while hostile ones hold their lane: one attempt's
#: deadline (the longest a full lane makes it wait), twice, and room for a loaded machine.
PROMPTLY = 2 * ATTEMPT_TIMEOUT + 5

DEPLOYS = {
    "name": "deploys",
    "description": "approvals asked by the deploy agent",
    "callback_secret_env": "SHARED_SECRET",
    "approvers": {"slack": ["U1"]},
    "deliver": {"slack": "C123"},
    "tools": {"deploy.prod": {"policy": "ask", "impact": "high"}},
}
# Started by a webhook whose secret is the callbacks' secret too.
WRITER = {
    "name": "writer",
    "instructions": "Write.",
    "model": "openai/none",
    "hooks": [{"name": HOOK, "secret_env": "SHARED_SECRET"}],
}


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def slack() -> AsyncIterator[SlackApi]:
    async with SlackApi() as api:
        yield api


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def server(
    tmp_path_factory: pytest.TempPathFactory, slack: SlackApi
) -> AsyncIterator[ServerProcess]:
    root = tmp_path_factory.mktemp("outbox")
    skills = root / "skills"
    skills.mkdir()
    (skills / "deploys.yaml").write_text(yaml.safe_dump(DEPLOYS))
    (skills / "writer.yaml").write_text(yaml.safe_dump(WRITER))
    env = http_mode_env(
        slack.url,
        "8f742231b10e8888abcd99yyyzzz85a5",
        SHARED_SECRET=SECRET,
        PIZZABOT_POLL_INTERVAL=str(POLL),
        PIZZABOT_OUTBOX_ATTEMPT_TIMEOUT=str(ATTEMPT_TIMEOUT),
        PIZZABOT_OUTBOX_CONCURRENCY=str(CONCURRENCY),
        PIZZABOT_OUTBOX_MAX_ATTEMPTS=str(MAX_ATTEMPTS),
        PIZZABOT_OUTBOX_BACKOFF_BASE="0.5",
        PIZZABOT_OUTBOX_BACKOFF_MAX="1",
        PIZZABOT_OUTBOX_RETRY_AFTER_MAX=str(RETRY_AFTER_MAX),
    )
    # No worker: a hook's run stays queued where the test can count it.
    proc = ServerProcess(data_dir=root / "data", skills_dir=skills, env=env, args=["--no-worker"])
    await proc.start()
    try:
        yield proc
    finally:
        proc.stop()


async def ask(server: ServerProcess, title: str, callback_url: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "skill": "deploys",
        "title": title,
        "tool": "deploy.prod",
        "args": {"env": "prod", "version": title},
    }
    if callback_url is not None:
        body["callback_url"] = callback_url
    async with server.client() as c:
        r = await c.post("/api/requests", json=body)
    assert r.status_code == 201, r.text
    created: dict[str, Any] = r.json()
    return created


async def reject(server: ServerProcess, request: dict[str, Any]) -> None:
    async with server.client() as c:
        r = await c.post(
            f"/api/items/{request['item_id']}/decision",
            json={"decision": "reject", "reason": "not today"},
        )
    assert r.status_code == 200, r.text


async def api(server: ServerProcess, path: str) -> Any:
    async with server.client() as c:
        r = await c.get(path)
    assert r.status_code == 200, r.text
    return r.json()


async def writer_runs(server: ServerProcess) -> set[str]:
    runs = await api(server, "/api/runs")
    return {r["id"] for r in runs["items"] if r["skill"] == "writer"}


async def arrives(
    check: Callable[[], Any], *, what: str, within: float, server: ServerProcess
) -> float:
    """Seconds until `check()` holds; fails once `within` seconds have passed."""
    start = time.monotonic()
    await eventually(
        lambda: check() or None, what=what, timeout=within, interval=0.05, context=server.log
    )
    return time.monotonic() - start


async def dead_letter(server: ServerProcess, item_id: str, *, within: float) -> dict[str, Any]:
    async def entry() -> dict[str, Any] | None:
        audit = await api(server, "/api/audit")
        return next(
            (
                e
                for e in audit["items"]
                if e["action"] == "delivery_dead" and e["item_id"] == item_id
            ),
            None,
        )

    found: dict[str, Any] = await eventually(
        entry, what=f"a dead letter for item {item_id}", timeout=within, context=server.log
    )
    return found


async def test_a_callback_asking_to_wait_for_ever_is_retried_at_the_ceiling_then_given_up(
    server: ServerProcess,
) -> None:
    async with CallbackPeer() as peer:
        greedy = await ask(server, "greedy", callback_url=peer.url("wait"))
        healthy = await ask(server, "healthy", callback_url=peer.url("ok"))
        await reject(server, greedy)
        await reject(server, healthy)

        # The greedy receiver no longer stops the outbox: the next callback still goes out.
        await arrives(
            lambda: peer.posts_to("ok"),
            what="the healthy request's callback",
            within=PROMPTLY,
            server=server,
        )
        # It is tried again after the ceiling, not after three million years (nor twice a
        # second), and given up after its attempts.
        pace = RETRY_AFTER_MAX + ATTEMPT_TIMEOUT + 5
        await arrives(
            lambda: len(peer.posts_to("wait")) >= MAX_ATTEMPTS,
            what=f"{MAX_ATTEMPTS} attempts at the greedy callback",
            within=MAX_ATTEMPTS * pace,
            server=server,
        )
        entry = await dead_letter(server, greedy["item_id"], within=pace)
        tries = [p.at for p in peer.posts_to("wait")]
        gaps = [b - a for a, b in itertools.pairwise(tries)]
        assert all(RETRY_AFTER_MAX - 0.1 <= gap <= pace for gap in gaps), gaps

    assert len(tries) == MAX_ATTEMPTS
    assert (entry["channel"], entry["actor"]) == ("callback", "outbox")
    assert entry["detail"]["error"] == "callback answered 503"
    assert entry["detail"]["attempts"] == MAX_ATTEMPTS
    status = await api(server, "/api/status")
    assert status["outbox"]["dead_by_channel"].get("callback", 0) >= 1
    assert status["outbox"]["dead"] >= 1


async def test_a_dripping_callback_holds_neither_other_callbacks_nor_cards(
    server: ServerProcess, slack: SlackApi
) -> None:
    async with CallbackPeer(drip_every=0.5) as peer:
        # As many dripping receivers as the callback lane sends at once: it fills up.
        drips = [await ask(server, f"drip {n}", peer.url("drip")) for n in range(CONCURRENCY)]
        healthy = await ask(server, "healthy too", callback_url=peer.url("ok"))
        for request in [*drips, healthy]:
            await reject(server, request)
        await arrives(
            lambda: peer.connections_to("drip"),
            what="a dripping callback to be under way",
            within=PROMPTLY,
            server=server,
        )

        # A new card on Slack does not wait for the callbacks' lane at all ...
        card = await ask(server, "card while dripping")
        await arrives(
            lambda: any(
                card["item_id"] in json.dumps(c.args.get("blocks") or "")
                for c in slack.calls_to("chat.postMessage")
            ),
            what="the new request's Slack card",
            within=PROMPTLY,
            server=server,
        )
        # ... and another callback waits at most for one attempt's deadline.
        await arrives(
            lambda: peer.posts_to("ok"),
            what="the healthy callback",
            within=PROMPTLY,
            server=server,
        )
        # Every dripped answer is cut at the deadline: the server hangs up (and tries again).
        await arrives(
            lambda: all(c.closed for c in peer.connections_to("drip")[:CONCURRENCY]),
            what="the server to hang up on the dripping answers",
            within=ATTEMPT_TIMEOUT + 5,
            server=server,
        )
        held = [c.closed - c.opened for c in peer.connections_to("drip") if c.closed]
        assert all(h <= ATTEMPT_TIMEOUT + 3 for h in held), held
        for request in drips:  # given up in the end, like any receiver that never answers
            await dead_letter(server, request["item_id"], within=MAX_ATTEMPTS * PROMPTLY)


async def test_a_huge_callback_answer_is_hung_up_on_unread(server: ServerProcess) -> None:
    async with CallbackPeer(huge_bytes=64 * 1024 * 1024) as peer:
        request = await ask(server, "huge", callback_url=peer.url("huge"))
        await reject(server, request)
        await arrives(
            lambda: peer.connections_to("huge") and peer.connections_to("huge")[0].closed,
            what="the server to hang up on the huge answer",
            within=PROMPTLY,
            server=server,
        )
        (conn,) = peer.connections_to("huge")
    # What the server took is what the sockets' buffers hold, not the body's 64 MiB.
    assert conn.answered < 24 * 1024 * 1024, conn.answered
    # A 200 is a 200: the callback was delivered, not given up.
    audit = await api(server, "/api/audit")
    assert not [
        e
        for e in audit["items"]
        if e["action"] == "delivery_dead" and e["item_id"] == request["item_id"]
    ]


def _receiver_check() -> Callable[..., bool]:
    """The `verified` function docs/api.md tells a callback receiver to use, as written."""
    (code,) = [
        block
        for block in re.findall(r"```python\n(.*?)```", DOCS.read_text(), re.S)
        if "def verified" in block
    ]
    space: dict[str, Any] = {}
    exec(code, space)  # the docs' own snippet, run as a reader would
    check: Callable[..., bool] = space["verified"]
    return check


async def test_a_captured_callback_replayed_as_a_webhook_starts_nothing(
    server: ServerProcess,
) -> None:
    async with CallbackPeer() as peer:
        request = await ask(server, "captured", callback_url=peer.url("ok"))
        await reject(server, request)
        await arrives(
            lambda: peer.posts_to("ok"), what="the callback", within=PROMPTLY, server=server
        )
        (captured,) = peer.posts_to("ok")

    # The receiver's check from the docs takes the callback as Pizza Bot's.
    verified = _receiver_check()
    headers = {
        "X-Pizzabot-Timestamp": captured.headers["x-pizzabot-timestamp"],
        "X-Pizzabot-Signature": captured.headers["x-pizzabot-signature"],
        "Idempotency-Key": captured.headers["idempotency-key"],
        "Content-Type": captured.headers["content-type"],
    }
    assert verified(headers, captured.body, SECRET)
    assert headers["Idempotency-Key"] == request["id"]

    # Sent on, byte for byte, to the hook that shares its secret: refused, and no run.
    before = await writer_runs(server)
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as c:
        replay = await c.post(f"/hooks/{HOOK}", content=captured.body, headers=headers)
    assert replay.status_code == 401, replay.text
    assert await writer_runs(server) == before


async def test_a_webhook_is_never_a_valid_callback(server: ServerProcess) -> None:
    """The other way round: what a webhook sender signs fails a callback receiver's check,
    while the webhook itself is accepted (senders change nothing)."""
    body = json.dumps({"id": "r1", "status": "approved"}).encode()
    stamp, key = str(int(time.time())), "r1"
    signed = stamp.encode() + b"\n" + key.encode() + b"\n" + body
    signature = "sha256=" + hmac.new(SECRET.encode(), signed, hashlib.sha256).hexdigest()
    headers = {
        "X-Pizzabot-Timestamp": stamp,
        "X-Pizzabot-Signature": signature,
        "Idempotency-Key": key,
        "Content-Type": "application/json",
    }
    assert not _receiver_check()(headers, body, SECRET)
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as c:
        hook = await c.post(f"/hooks/{HOOK}", content=body, headers=headers)
    assert hook.status_code == 202, hook.text
    assert hook.json()["run_id"] in await writer_runs(server)
