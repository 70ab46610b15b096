"""Webhooks against a real `pizzabot serve` process: signed requests start runs, everything
else is refused with a clear 4xx and no run; and the store's memory of accepted signatures."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import Connection, select

from pizzabot.channels.triggers.hooks import sign
from pizzabot.store.migrate import upgrade
from pizzabot.store.sql import SqlStore, connect
from pizzabot.store.tables_triggers import HookSignatureRow
from pizzabot.store.triggers import TriggerStore
from tests.peers.stack import Reply, Stack, turns

SECRET = "orders-hook-secret-0123"
HOOKS = {
    "hooks": [
        {"name": "orders", "secret_env": "ORDERS_HOOK_SECRET"},
        {"name": "unset", "secret_env": "NOT_SET_ANYWHERE_4711"},
    ]
}
ENV = {"ORDERS_HOOK_SECRET": SECRET, "PIZZABOT_WEBHOOK_MAX_BYTES": "2048"}


def signed(
    body: bytes,
    *,
    secret: str = SECRET,
    at: float | None = None,
    content_type: str = "application/json",
    key: str | None = None,
) -> dict[str, str]:
    stamp = str(int(time.time() if at is None else at))
    headers = {
        "Content-Type": content_type,
        "X-Pizzabot-Timestamp": stamp,
        "X-Pizzabot-Signature": sign(secret, stamp, body, key=key or ""),
    }
    if key is not None:
        headers["Idempotency-Key"] = key
    return headers


async def post(st: Stack, name: str, body: bytes, headers: dict[str, str]) -> httpx.Response:
    async with httpx.AsyncClient(base_url=st.server.url, timeout=30) as c:  # no API token
        return await c.post(f"/hooks/{name}", content=body, headers=headers)


async def runs_of(st: Stack) -> list[dict[str, Any]]:
    async with st.client() as c:
        items: list[dict[str, Any]] = (await c.get("/api/runs")).json()["items"]
        return items


async def test_a_signed_webhook_starts_one_run_per_delivery(tmp_path: Path) -> None:
    async with Stack(tmp_path, script=turns(Reply(text="order noted")), skill=HOOKS, env=ENV) as st:
        body = json.dumps({"order": 42, "customer": "Ann"}).encode()
        r = await post(st, "orders", body, signed(body, key="delivery-1"))
        assert r.status_code == 202, r.text
        run_id = r.json()["run_id"]
        assert r.headers["location"] == f"/api/runs/{run_id}"
        run = await st.get_run(run_id)
        assert run["trigger"] == "hook:orders" and run["input"] == body.decode()
        assert run["events"][0]["data"] == {
            "input": body.decode(),
            "trigger": "hook:orders",
            "by": "hook:orders",
        }

        # A retried delivery (new timestamp, same Idempotency-Key) gets the same run.
        again = await post(st, "orders", body, signed(body, key="delivery-1", at=time.time() + 1))
        assert again.status_code == 202 and again.json()["run_id"] == run_id
        assert len(await runs_of(st)) == 1

        # A form body becomes a JSON object; another key is another run.
        form = b"order=43&customer=Bob&tag=a&tag=b"
        r = await post(
            st,
            "orders",
            form,
            signed(form, content_type="application/x-www-form-urlencoded", key="d-2"),
        )
        assert r.status_code == 202
        run = await st.get_run(r.json()["run_id"])
        assert json.loads(run["input"]) == {"order": "43", "customer": "Bob", "tag": ["a", "b"]}
        assert len(await runs_of(st)) == 2


async def test_bad_webhooks_are_refused_and_start_nothing(tmp_path: Path) -> None:
    async with Stack(tmp_path, script=turns(Reply(text="ok")), skill=HOOKS, env=ENV) as st:
        body = b'{"order": 1}'
        cases: list[tuple[str, str, bytes, dict[str, str], int, str]] = [
            ("unknown hook", "nope", body, signed(body), 404, "no hook named"),
            (
                "bad signature",
                "orders",
                body,
                signed(body, secret="guess"),
                401,
                "bad X-Pizzabot-Signature",
            ),
            (
                "body changed",
                "orders",
                b'{"order": 2}',
                signed(body),
                401,
                "bad X-Pizzabot-Signature",
            ),
            ("stale", "orders", body, signed(body, at=time.time() - 600), 401, "stale"),
            ("from the future", "orders", body, signed(body, at=time.time() + 600), 401, "stale"),
            (
                "no timestamp",
                "orders",
                body,
                {k: v for k, v in signed(body).items() if k != "X-Pizzabot-Timestamp"},
                401,
                "missing",
            ),
            (
                "no signature",
                "orders",
                body,
                {k: v for k, v in signed(body).items() if k != "X-Pizzabot-Signature"},
                401,
                "bad",
            ),
            ("too big", "orders", b"x" * 3000, signed(b"x" * 3000), 413, "larger than 2048"),
            ("not JSON", "orders", b"{order", signed(b"{order"), 422, "not valid JSON"),
            ("no secret set", "unset", body, signed(body), 503, "no secret"),
        ]
        for what, name, payload, headers, status, detail in cases:
            r = await post(st, name, payload, headers)
            assert r.status_code == status, (what, r.text)
            assert detail in r.json()["detail"], (what, r.text)

        # Without a Content-Length (chunked), the limit still holds.
        async def chunks() -> AsyncIterator[bytes]:
            for _ in range(5):
                yield b"y" * 1000

        headers = signed(b"y" * 5000)
        async with httpx.AsyncClient(base_url=st.server.url, timeout=30) as c:
            r = await c.post("/hooks/orders", content=chunks(), headers=headers)
        assert r.status_code == 413

        # The kill switch refuses webhooks too.
        async with st.client() as c:
            assert (await c.post("/api/kill")).status_code == 200
        r = await post(st, "orders", body, signed(body))
        assert r.status_code == 409 and "kill switch" in r.json()["detail"]

        assert await runs_of(st) == []


async def test_a_signature_is_remembered_until_stale_then_pruned(db_url: str) -> None:
    """The single-use memory on both backends, with the clock in the test's hand."""
    engine = connect(db_url)
    await upgrade(engine)
    store = SqlStore(engine)
    triggers = TriggerStore(store)
    t0 = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
    until = t0 + timedelta(minutes=10)

    async def remembered() -> list[str]:
        def tx(c: Connection) -> list[str]:
            return list(c.execute(select(HookSignatureRow.signature)).scalars())

        return await store.db.run(tx)

    try:
        assert await triggers.accept_signature("a" * 64, hook="orders", expires_at=until, now=t0)
        assert not await triggers.accept_signature(
            "a" * 64, hook="orders", expires_at=until, now=t0 + timedelta(minutes=9)
        )
        # Forgotten (its request was refused after all), it may be accepted again.
        await triggers.forget_signature("a" * 64)
        assert await triggers.accept_signature("a" * 64, hook="orders", expires_at=until, now=t0)
        # Past its expiry, the next accepted signature prunes it.
        later = until + timedelta(seconds=1)
        assert await triggers.accept_signature(
            "b" * 64, hook="orders", expires_at=later + timedelta(minutes=10), now=later
        )
        assert await remembered() == ["b" * 64]
    finally:
        await store.aclose()
