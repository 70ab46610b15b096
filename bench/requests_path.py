"""The request path with many agents waiting: how a decision reaches its own waiter when
hundreds or thousands of other requests hold a long-poll open on the same server.

For each crowd size (100 and 1,000 in the full bench; `--crowd` adds more, e.g. 10,000), that
many requests are made in a served bot's database (SQLite) before it starts, as the API makes
them (`bench.crowd.fill`); once `pizzabot serve` is up and idle, processes of their own
(`bench.crowd.Crowd`) hold a long-poll on each (`GET /api/requests/{id}?wait=60`, asked again
when it ends pending). Once the server is idle again, every poll read and parked, the bench
waits until the crowd asks again at a steady rate: every first poll has ended (together, a
burst the server works through) and been asked again, the second polls spread over a minute
as agents that began at different moments ask, each agent once a minute after; then `samples`
fresh requests are made and decided through the API, one at a time, while the crowd waits:
- `POST /api/requests` sent → answered (the request recorded, its card made), p50/p99;
- decision POST sent → that request's long-poll answered, p50/p99. A decision wakes only the
  waiters of its own run, so this should not grow with the crowd;
- the server's RSS growth per held long-poll and its CPU time per long-poll parked (read from
  /proc before and after parking them), and how long parking them took.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import yaml

from bench.crowd import WAIT_S, Crowd, fill, holders_for
from bench.engine import child_env, free_port, percentile
from bench.procs import Child, _wait_answer

SKILL = {
    "name": "bench-requests",
    "description": "pizzabot bench: approvals asked through the requests API",
    "tools": {"bench.deploy": "ask"},
}
#: How long the server's CPU is watched at a time to know it idle.
_QUIET_S = 0.5
#: The server is past the burst of the crowd's first polls once a second of it keeps less than
#: this share of a core busy: working through the burst it keeps a whole core busy, at the
#: crowd's steady rate well under it (0.6 at 10,000).
_CALM_BUSY = 0.9


def _rss(pid: int) -> int:
    """Resident memory of process `pid`, in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for {pid}")


def _cpu_s(pid: int) -> float:
    """CPU time process `pid` has used, user and system, in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _calm(child: Child) -> None:
    """Until the server has worked through the burst of the crowd's first polls ending and
    being asked again: a second in which it kept less than `_CALM_BUSY` of a core busy."""
    began = time.perf_counter()
    while True:
        before = _cpu_s(child.pid)
        await asyncio.sleep(1.0)
        child.check()
        if _cpu_s(child.pid) - before < _CALM_BUSY:
            return
        if time.perf_counter() - began > 120:
            raise TimeoutError(
                f"the server stayed busy after the crowd's first polls:\n{child.tail()}"
            )


async def _quiet(child: Child, what: str) -> None:
    """Until the server is idle (under a tenth of a core for half a second): every request
    it was sent read and answered or parked, and the cards of a crowd made before it
    started dealt with."""
    began = time.perf_counter()
    last = _cpu_s(child.pid)
    while True:
        await asyncio.sleep(_QUIET_S)
        child.check()
        now = _cpu_s(child.pid)
        if now - last < _QUIET_S / 10:
            return
        last = now
        if time.perf_counter() - began > 600:
            raise TimeoutError(f"the server stayed busy {what}:\n{child.tail()}")


def _env(work: Path, token: str, crowd: int, port: int) -> dict[str, str]:
    """The served bot's environment (the crowd's fill runs with the same)."""
    skills = work / "skills-requests"
    skills.mkdir(parents=True, exist_ok=True)
    (skills / "bench-requests.yaml").write_text(yaml.safe_dump(SKILL, sort_keys=False))
    return child_env(
        {
            "PIZZABOT_DATA_DIR": str(work / f"serve-requests-{crowd}"),
            "PIZZABOT_SKILLS_DIR": str(skills),
            "PIZZABOT_PORT": str(port),
            "PIZZABOT_API_TOKEN": token,
            # Room for the crowd's connections and the ones that measure.
            "PIZZABOT_MAX_CONNECTIONS": str(crowd + 100),
        }
    )


@contextlib.asynccontextmanager
async def _server(env: dict[str, str], crowd: int, log: Path) -> AsyncIterator[Child]:
    child = Child(name=f"serve-requests-{crowd}", args=["serve", "--no-worker"], env=env, log=log)
    child.start()
    try:
        await _wait_answer(child, f"http://127.0.0.1:{env['PIZZABOT_PORT']}/readyz", "/readyz")
        yield child
    finally:
        child.stop(signal.SIGTERM)


async def _ask(api: httpx.AsyncClient, tag: str) -> dict[str, Any]:
    body = {"skill": "bench-requests", "title": tag, "tool": "bench.deploy", "args": {"k": tag}}
    r = await api.post("/api/requests", json=body)
    r.raise_for_status()
    state: dict[str, Any] = r.json()
    return state


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


async def _crowd(work: Path, crowd: int, samples: int, wait: float) -> dict[str, Any]:
    token = "bench-token-" + uuid.uuid4().hex
    port = free_port()
    env = _env(work, token, crowd, port)
    log = work / f"serve-requests-{crowd}.log"
    began = time.perf_counter()
    ids = await fill(env, crowd, str(SKILL["name"]), log)
    filled = time.perf_counter() - began
    headers = {"Authorization": f"Bearer {token}"}
    # Idle connections are dropped before the server's keep-alive time-out closes them.
    limits = httpx.Limits(keepalive_expiry=1.0)
    async with (
        _server(env, crowd, log) as child,
        httpx.AsyncClient(
            base_url=f"http://127.0.0.1:{port}", headers=headers, timeout=700, limits=limits
        ) as api,
    ):
        await _one(api, -1)  # not timed: the first request warms the server's paths
        await _quiet(child, "with the crowd's cards")
        before, cpu, parking = _rss(child.pid), _cpu_s(child.pid), time.perf_counter()
        crowd_log = work / f"crowd-{crowd}.log"
        async with Crowd("127.0.0.1", port, token, ids, crowd_log, wait=wait) as held:
            await _quiet(child, "parking the crowd's long-polls")
            parked = time.perf_counter() - parking - _QUIET_S  # its last look found it idle
            held_bytes = (_rss(child.pid) - before) / crowd
            cpu_ms = (_cpu_s(child.pid) - cpu) * 1000 / crowd
            # Timed once the first polls have ended and been asked again (their second ones
            # end spread over a minute): the crowd then asks at a steady rate, one in 60 s each.
            await held.asked_again(within=2 * wait + 120)
            await _calm(child)
            cpu_timed, timing = _cpu_s(child.pid), time.perf_counter()
            timed = [await _one(api, k) for k in range(samples)]
            busy = (_cpu_s(child.pid) - cpu_timed) / (time.perf_counter() - timing)
        report = held.report
    if report.get("decided") or report.get("errors"):
        raise RuntimeError(f"the crowd's agents: {report}")
    return {
        "waiting": crowd,
        "fill_s": filled,
        "request_p50_ms": percentile([t for t, _ in timed], 50),
        "request_p99_ms": percentile([t for t, _ in timed], 99),
        "wake_p50_ms": percentile([w for _, w in timed], 50),
        "wake_p99_ms": percentile([w for _, w in timed], 99),
        "rss_per_held_poll_kib": held_bytes / 1024,
        "park_s": parked,
        "server_cpu_ms_per_poll": cpu_ms,
        "holders": holders_for(crowd),
        # Long-polls that ended pending and were asked again while the crowd was held, and
        # the cores the server kept busy while the samples were timed (theirs and the
        # crowd's asks, one a minute each).
        "polls_asked_again": report.get("pending_answers", 0),
        "server_cores_busy_timed": busy,
        "polls_closed_by_server": report.get("closed_by_server", 0),
    }


async def bench_requests_path(
    work: Path, crowds: tuple[int, ...], samples: int, *, wait: float = WAIT_S
) -> dict[str, Any]:
    """The figures above for each crowd size, smallest first; `wait`: seconds an agent of
    the crowd waits on one long-poll."""
    return {str(n): await _crowd(work, n, samples, wait) for n in sorted(crowds)}
