"""Webhook requests are single-use and bound to what they say, against a real
`pizzabot serve` process.

A captured signed request sent again is refused (it used to start one run per copy); the
`Idempotency-Key` is covered by the signature, so it cannot be swapped or added to a captured
request; a key is bound to its body (another body under the same key is a 409, not the first
run); JSON nested deeper than the parser can follow is a 400, not a 500.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio

from tests.peers.stack import Reply, Stack, turns

pytestmark = pytest.mark.asyncio(loop_scope="module")

SECRET = "replay-hook-secret-4711"
NAMES = ("replay", "keyed", "bound", "nested")
HOOKS = {"hooks": [{"name": n, "secret_env": "REPLAY_HOOK_SECRET"} for n in NAMES]}


def sign(secret: str, stamp: str, body: bytes, *, key: str = "") -> str:
    """What a sender computes, as the docs put it: HMAC of `timestamp LF key LF body`."""
    signed = stamp.encode() + b"\n" + key.encode() + b"\n" + body
    return "sha256=" + hmac.new(secret.encode(), signed, hashlib.sha256).hexdigest()


def sign_without_key(secret: str, stamp: str, body: bytes) -> str:
    """The older form, over `timestamp.body`."""
    signed = stamp.encode() + b"." + body
    return "sha256=" + hmac.new(secret.encode(), signed, hashlib.sha256).hexdigest()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def st(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Stack]:
    # One server for the module; each test uses its own hook, so their runs stay apart. No
    # worker: a hook only records a run, and the runs stay queued where the test can count them.
    root: Path = tmp_path_factory.mktemp("hooks")
    env = {"REPLAY_HOOK_SECRET": SECRET}
    async with Stack(
        root, script=turns(Reply(text="ok")), skill=HOOKS, env=env, args=["--no-worker"]
    ) as stack:
        yield stack


def headers(
    signature: str, stamp: str, *, key: str | None = None, content_type: str = "application/json"
) -> dict[str, str]:
    out = {
        "Content-Type": content_type,
        "X-Pizzabot-Timestamp": stamp,
        "X-Pizzabot-Signature": signature,
    }
    if key is not None:
        out["Idempotency-Key"] = key
    return out


def signed(body: bytes, *, key: str | None = None, at: float | None = None) -> dict[str, str]:
    stamp = str(int(time.time() if at is None else at))
    return headers(sign(SECRET, stamp, body, key=key or ""), stamp, key=key)


async def post(st: Stack, name: str, body: bytes, hdrs: dict[str, str]) -> httpx.Response:
    async with httpx.AsyncClient(base_url=st.server.url, timeout=30) as c:  # no API token
        return await c.post(f"/hooks/{name}", content=body, headers=hdrs)


async def runs_of(st: Stack, hook: str) -> list[dict[str, Any]]:
    async with st.client() as c:
        items: list[dict[str, Any]] = (await c.get("/api/runs")).json()["items"]
    return [r for r in items if r["trigger"] == f"hook:{hook}"]


async def test_a_captured_webhook_sent_again_starts_no_second_run(st: Stack) -> None:
    body = json.dumps({"order": 42}).encode()
    captured = signed(body)
    answers = [await post(st, "replay", body, captured) for _ in range(5)]
    assert [a.status_code for a in answers] == [202, 409, 409, 409, 409], answers[-1].text
    assert "accepted before" in answers[1].json()["detail"]
    assert len(await runs_of(st, "replay")) == 1

    # The same request signed again (a new timestamp) is a new delivery, as a sender retries.
    again = await post(st, "replay", body, signed(body, at=time.time() + 1))
    assert again.status_code == 202
    assert len(await runs_of(st, "replay")) == 2


async def test_the_idempotency_key_is_covered_by_the_signature(st: Stack) -> None:
    body = b'{"order": 7}'
    stamp = str(int(time.time()))
    # A captured keyed request with its key swapped for another would be a second run.
    swapped = headers(sign(SECRET, stamp, body, key="k-1"), stamp, key="k-2")
    r = await post(st, "keyed", body, swapped)
    assert r.status_code == 401 and "bad X-Pizzabot-Signature" in r.json()["detail"]
    # A signature made without the key does not cover a request that carries one.
    legacy = sign_without_key(SECRET, stamp, body)
    r = await post(st, "keyed", body, headers(legacy, stamp, key="k-3"))
    assert r.status_code == 401
    r = await post(st, "keyed", body, headers(sign(SECRET, stamp, body), stamp, key="k-4"))
    assert r.status_code == 401
    assert await runs_of(st, "keyed") == []

    # Signed with its key, it goes through; senders that sign `timestamp.body` and send no key
    # keep working.
    r = await post(
        st, "keyed", body, headers(sign(SECRET, stamp, body, key="k-1"), stamp, key="k-1")
    )
    assert r.status_code == 202, r.text
    r = await post(st, "keyed", body, headers(legacy, stamp))
    assert r.status_code == 202, r.text
    assert len(await runs_of(st, "keyed")) == 2


async def test_an_idempotency_key_is_bound_to_its_body(st: Stack) -> None:
    first = b'{"order": 1, "amount": 10}'
    r = await post(st, "bound", first, signed(first, key="order-1"))
    assert r.status_code == 202
    run_id = r.json()["run_id"]

    other = b'{"order": 1, "amount": 10000}'
    r = await post(st, "bound", other, signed(other, key="order-1", at=time.time() + 1))
    assert r.status_code == 409, r.text
    assert "another request body" in r.json()["detail"]

    # A true retry (the same body, signed anew) still gets the first run.
    r = await post(st, "bound", first, signed(first, key="order-1", at=time.time() + 2))
    assert r.status_code == 202 and r.json()["run_id"] == run_id
    runs = await runs_of(st, "bound")
    assert [r["id"] for r in runs] == [run_id]
    assert (await st.get_run(run_id))["input"] == first.decode()


async def test_deeply_nested_json_is_refused_with_400(st: Stack) -> None:
    for body in (
        b"[" * 100_000 + b"]" * 100_000,
        b'{"a":' * 50_000 + b"1" + b"}" * 50_000,
    ):
        r = await post(st, "nested", body, signed(body))
        assert r.status_code == 400, r.text[:200]
        assert "nested too deeply" in r.json()["detail"]
    # Shallow JSON still starts a run.
    body = b'{"a": {"b": [1, 2, {"c": 3}]}}'
    assert (await post(st, "nested", body, signed(body))).status_code == 202
    assert len(await runs_of(st, "nested")) == 1
