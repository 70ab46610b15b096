"""The request path with many agents waiting: how a decision reaches its own waiter when
hundreds or thousands of other requests hold a long-poll open on the same server.

For each crowd size (100 and 1,000 in the full bench; `--crowd` adds more, e.g. 10,000, which
takes a 2-core machine over ten minutes to build), a served bot (`pizzabot serve`, SQLite) gets that many requests, each with
a long-poll parked on `GET /api/requests/{id}?wait=`; then, one at a time, `samples` fresh
requests are made and decided through the API while the crowd waits:
- `POST /api/requests` sent → answered (the request recorded, its card made), p50/p99;
- decision POST sent → that request's long-poll answered, p50/p99. A decision wakes only the
  waiters of its own run, so this should not grow with the crowd;
- the server's RSS growth per held long-poll (read from /proc before and after parking them).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import yaml

from bench.engine import child_env, free_port, percentile
from bench.procs import Child, _wait_answer

SKILL = {
    "name": "bench-requests",
    "description": "pizzabot bench: approvals asked through the requests API",
    "tools": {"bench.deploy": "ask"},
}
#: Requests made at once while the crowd is built (the server takes them one by one anyway).
_AT_ONCE = 50


def _rss(pid: int) -> int:
    """Resident memory of process `pid`, in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for {pid}")


@contextlib.asynccontextmanager
async def _server(work: Path, token: str, crowd: int) -> AsyncIterator[tuple[str, Child]]:
    skills = work / "skills-requests"
    skills.mkdir(parents=True, exist_ok=True)
    (skills / "bench-requests.yaml").write_text(yaml.safe_dump(SKILL, sort_keys=False))
    port = free_port()
    child = Child(
        name=f"serve-requests-{crowd}",
        args=["serve", "--no-worker"],
        env=child_env(
            {
                "PIZZABOT_DATA_DIR": str(work / f"serve-requests-{crowd}"),
                "PIZZABOT_SKILLS_DIR": str(skills),
                "PIZZABOT_PORT": str(port),
                "PIZZABOT_API_TOKEN": token,
                # Room for the crowd's connections and the ones that measure.
                "PIZZABOT_MAX_CONNECTIONS": str(crowd + 100),
            }
        ),
        log=work / f"serve-requests-{crowd}.log",
    )
    base = f"http://127.0.0.1:{port}"
    child.start()
    try:
        await _wait_answer(child, f"{base}/readyz", "/readyz")
        yield base, child
    finally:
        child.stop(signal.SIGTERM)


async def _ask(api: httpx.AsyncClient, tag: str) -> dict[str, Any]:
    body = {"skill": "bench-requests", "title": tag, "tool": "bench.deploy", "args": {"k": tag}}
    r = await api.post("/api/requests", json=body)
    r.raise_for_status()
    state: dict[str, Any] = r.json()
    return state


async def _hold(api: httpx.AsyncClient, request_id: str) -> None:
    """Wait on the request as an agent does: a long-poll, again each time one ends pending
    (the server holds one for at most a minute)."""
    while True:
        try:
            r = await api.get(f"/api/requests/{request_id}", params={"wait": 60})
        except httpx.TransportError:
            continue  # a connection the server closed as it was reused: ask again, as agents do
        r.raise_for_status()
        if r.json()["status"] != "pending":
            raise RuntimeError(f"request {request_id} of the crowd was decided")


async def _park(
    api: httpx.AsyncClient, crowd: int, clients: list[httpx.AsyncClient]
) -> list[asyncio.Task[None]]:
    """`crowd` requests, each with an agent waiting on it. The agents share a client per
    `_AT_ONCE` (`clients` gets them): a client's connection pool works in proportion to its
    connections on every request, so one client for thousands would make the bench's own
    process the slow part when their long-polls end together."""
    made: list[dict[str, Any]] = []
    for start in range(0, crowd, _AT_ONCE):
        batch = range(start, min(crowd, start + _AT_ONCE))
        made += await asyncio.gather(*(_ask(api, f"crowd {k}") for k in batch))
        limits = httpx.Limits(keepalive_expiry=1.0)
        clients.append(
            httpx.AsyncClient(
                base_url=api.base_url, headers=api.headers, timeout=700, limits=limits
            )
        )
    return [asyncio.create_task(_hold(clients[k // _AT_ONCE], m["id"])) for k, m in enumerate(made)]


async def _one(api: httpx.AsyncClient, k: int) -> tuple[float, float]:
    """(request POST → answered, decision POST → its long-poll answered), in ms."""
    began = time.perf_counter()
    state = await _ask(api, f"timed {k}")
    made = time.perf_counter()
    waiting = asyncio.create_task(api.get(f"/api/requests/{state['id']}", params={"wait": 60}))
    # Parked on the server before the decision (a missed wake-up would show as 60 s).
    await asyncio.sleep(0.05)
    decided = time.perf_counter()
    d = await api.post(f"/api/items/{state['item_id']}/decision", json={"decision": "approve"})
    d.raise_for_status()
    answer = await waiting
    woke = time.perf_counter()
    if answer.json()["status"] == "pending":
        raise RuntimeError("the long-poll ended without the decision")
    return (made - began) * 1000, (woke - decided) * 1000


async def _crowd(work: Path, crowd: int, samples: int) -> dict[str, Any]:
    token = "bench-token-" + uuid.uuid4().hex
    # Idle connections are dropped before the server's keep-alive time-out closes them.
    limits = httpx.Limits(
        max_connections=crowd + 50, max_keepalive_connections=crowd + 50, keepalive_expiry=1.0
    )
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        _server(work, token, crowd) as (base, child),
        httpx.AsyncClient(base_url=base, headers=headers, timeout=700, limits=limits) as api,
    ):
        await _one(api, -1)  # not timed: the first request warms the server's paths
        before = _rss(child.pid)
        clients: list[httpx.AsyncClient] = []
        parked = await _park(api, crowd, clients)
        await asyncio.sleep(1.0)  # every long-poll read and parked on the server
        held_bytes = (_rss(child.pid) - before) / crowd
        timed = [await _one(api, k) for k in range(samples)]
        for p in parked:
            if p.done():
                p.result()  # a crowd's agent that failed says why
        for p in parked:
            p.cancel()
        await asyncio.gather(*parked, return_exceptions=True)
        await asyncio.gather(*(c.aclose() for c in clients))
    return {
        "waiting": crowd,
        "request_p50_ms": percentile([t for t, _ in timed], 50),
        "request_p99_ms": percentile([t for t, _ in timed], 99),
        "wake_p50_ms": percentile([w for _, w in timed], 50),
        "wake_p99_ms": percentile([w for _, w in timed], 99),
        "rss_per_held_poll_kib": held_bytes / 1024,
    }


async def bench_requests_path(work: Path, crowds: tuple[int, ...], samples: int) -> dict[str, Any]:
    """The figures above for each crowd size, smallest first."""
    return {str(n): await _crowd(work, n, samples) for n in sorted(crowds)}
