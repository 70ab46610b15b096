"""The parts of `pizzabot bench` that run the engine in the bench's own process (or, for the
memory figure, in one fresh process): the step, decision and memory measurements. The scripted
model they call runs in a process of its own (`bench.model`). See `bench.runner` for
what the figures mean.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import math
import os
import socket
import sys
import time
import uuid
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

from bench.model import ModelProcess
from bench.tools import LOG_ENV
from pizzabot.agent.events import (
    Event,
    EventPayload,
    ModelCall,
    RunStarted,
    ToolResult,
    ToolStarted,
)
from pizzabot.agent.model import Approve, Box, Item, ItemStatus, Run, RunStatus
from pizzabot.agent.policy.principal import Principal
from pizzabot.bot.services import Services
from pizzabot.store.sql import SqlStore

#: Model calls per run in the step figures: four tool steps, then the answer.
STEP_RUN_CALLS = 5
MIB = 1024 * 1024
#: Runs started at once by the memory part; its warm-up is one such batch.
MEMORY_BATCH = 500


#: Who the bench acts as: the owner, through the API.
BENCH = Principal.owner("api")


@dataclass(frozen=True)
class Sizes:
    steps: int  # model calls timed per backend
    waiting: int  # runs left waiting while decisions are timed
    samples: int  # decisions timed
    memory_runs: int  # runs made to wait for the memory figure
    throughput_runs: int  # runs per worker-count phase
    starts: int  # `pizzabot serve` starts timed
    channel_samples: int = 20  # decisions timed per channel
    crowds: tuple[int, ...] = (100,)  # requests waiting on long-polls, one server per size
    crowd_wait_s: float = 60  # seconds a crowd's agent waits on one long-poll
    fanout_waiting: int = 1000  # items waiting while a decision's fan-out is timed
    many_waiting: int = 100_000  # runs waiting (copied in the database) in `bench.waiting`
    many_samples: int = 300  # decisions timed with them waiting


async def json_child(
    call: str, config: dict[str, Any], model: ModelProcess, *, what: str
) -> dict[str, Any]:
    """Run `call` ("module:function", which takes `config` as JSON and prints its figures as
    one JSON line last) in a fresh Python process, and return those figures. Meanwhile the
    scripted model server forgets what it answered, once a second: it keeps every request."""
    module, function = call.split(":")
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        f"import sys, {module} as m; m.{function}(sys.argv[1])",
        json.dumps(config),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=child_env({}),
    )
    reading = asyncio.ensure_future(proc.communicate())
    while not reading.done():
        await model.forget()
        await asyncio.wait([reading], timeout=1)
    out, errors = reading.result()
    await model.forget()
    if proc.returncode != 0:
        raise RuntimeError(f"{what} failed:\n{errors.decode(errors='replace')[-3000:]}")
    result: dict[str, Any] = json.loads(out.decode().strip().splitlines()[-1])
    return result


def child_env(extra: dict[str, str]) -> dict[str, str]:
    """The environment of a process the bench starts: none of the caller's Pizza Bot settings
    (the bench decides them), quiet logs, litellm's bundled price map."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIZZABOT_")}
    env.update({"LITELLM_LOCAL_MODEL_COST_MAP": "True", "PIZZABOT_LOG_LEVEL": "WARNING"})
    env.update(extra)
    return env


# -- the workload's skills --------------------------------------------------------------


def write_skills(folder: Path, model_base: str, *, tools_log: Path | None) -> None:
    server: dict[str, Any] = {"command": "python", "args": ["-m", "bench.tools"]}
    if tools_log is not None:
        server["env"] = {LOG_ENV: str(tools_log)}
    folder.mkdir(parents=True, exist_ok=True)
    for name, policy in (("bench-auto", "auto"), ("bench-ask", "ask")):
        skill = {
            "name": name,
            "description": f"pizzabot bench: echo calls with policy {policy}",
            "instructions": "Call the echo tool as asked, then answer.",
            "model": "openai/bench",
            # Priced, as a real model is (litellm's table or the skill): for a model with no
            # price litellm searches its table under many spellings on every call.
            "model_options": {
                "api_base": model_base,
                "api_key": "bench",
                "input_cost_per_token": 1e-6,
                "output_cost_per_token": 2e-6,
            },
            "mcp_servers": {"bench": server},
            "tools": {"bench.echo": policy},
        }
        (folder / f"{name}.yaml").write_text(yaml.safe_dump(skill, sort_keys=False))


# -- small helpers -----------------------------------------------------------------------


def percentile(values: Iterable[float], p: float) -> float:
    """Nearest-rank percentile: an observed value, never an interpolation."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("no values")
    rank = max(1, math.ceil(len(ordered) * p / 100))
    return ordered[rank - 1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def rss_bytes() -> int:
    import psutil

    return int(psutil.Process().memory_info().rss)


def _ms(a: datetime, b: datetime) -> float:
    return (b - a).total_seconds() * 1000


def first_event(events: list[Event], kind: type[EventPayload]) -> Event:
    """The first event whose payload is of that type."""
    return next(e for e in events if isinstance(e.payload, kind))


def tool_body(result: ToolResult) -> dict[str, Any]:
    """What the echo tool said about itself (time, pids), from its TOOL_RESULT."""
    data: dict[str, Any] = json.loads(result.text)
    return data


async def count_status(store: SqlStore, status: RunStatus, *, since: datetime | None = None) -> int:
    """Runs in `status` (made at or after `since`). By time, not by a list of ids: the bench
    polls this while it measures, and a thousand ids cost PostgreSQL more to plan on every
    poll than the runs being timed."""
    from sqlalchemy import func, select

    from pizzabot.store.tables import RunRow

    q = select(func.count()).select_from(RunRow).where(RunRow.status == status.value)
    if since is not None:
        q = q.where(RunRow.created_at >= since)
    # A plain read beside the store's own transactions (SQLite in WAL mode reads concurrently).
    async with store.engine.connect() as conn:
        return int((await conn.execute(q)).scalar_one())


async def wait_count(
    store: SqlStore,
    status: RunStatus,
    count: int,
    *,
    timeout: float,
    what: str,
    interval: float = 0.05,
) -> None:
    deadline = time.monotonic() + timeout
    while (have := await count_status(store, status)) < count:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: {have} of {count} runs are {status} after {timeout:.0f}s")
        await asyncio.sleep(interval)


class RunEnds:
    """Which runs ended, as the engine's end-of-run hook tells it, so the bench waits for a
    timed run's end without reading the store meanwhile: every read would queue behind (on
    SQLite, hold up) the engine's own transactions and slow the run being timed. The timings
    themselves come from the runs' events."""

    def __init__(self, keep: int = 1000) -> None:
        self._waiting: dict[str, asyncio.Future[None]] = {}
        # Runs that ended before anyone waited on them (a bounded few: most runs are awaited).
        self._ended: OrderedDict[str, None] = OrderedDict()
        self._keep = keep

    async def __call__(self, run_id: str) -> None:
        future = self._waiting.pop(run_id, None)
        if future is None:
            self._ended[run_id] = None
            while len(self._ended) > self._keep:
                self._ended.popitem(last=False)
        elif not future.done():
            future.set_result(None)

    def watch(self, run_id: str) -> asyncio.Future[None]:
        """A future that resolves when the run has ended (at once if it already did)."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if run_id in self._ended:
            del self._ended[run_id]
            future.set_result(None)
        else:
            self._waiting[run_id] = future
        return future

    async def wait(self, store: SqlStore, run_id: str, timeout: float = 120.0) -> Run:
        """Wait for the run's end, then read it once: it must have finished DONE."""
        try:
            async with asyncio.timeout(timeout):
                await self.watch(run_id)
        except TimeoutError:
            run = await store.get_run(run_id)
            raise TimeoutError(f"bench run {run_id} is still {run.status}") from None
        finally:
            self._waiting.pop(run_id, None)
        run = await store.get_run(run_id)
        if run.status is not RunStatus.DONE:
            raise RuntimeError(f"bench run {run_id} ended {run.status}: {run.error}")
        return run


# -- the engine in this process ----------------------------------------------------------


@contextlib.asynccontextmanager
async def engine_here(
    url: str, work: Path, skills: Path, *, ends: RunEnds | None = None, concurrency: int = 8
) -> AsyncIterator[Services]:
    """The server's engine, store and worker, built as `pizzabot serve` builds them, without
    HTTP: the bench times the engine, not FastAPI. `ends` is told of every run that ends;
    `concurrency` is how many runs the worker carries at once."""
    from pizzabot.bot.server import build, shutdown, start_worker
    from pizzabot.bot.settings import Settings

    settings = Settings(
        database_url=url,
        data_dir=work,
        skills_dir=skills,
        worker_concurrency=concurrency,
        poll_interval=2.0,
        lease_seconds=30.0,
    )
    svc = await build(settings, token="bench", with_worker=True)
    assert svc.worker is not None
    if ends is not None:
        svc.ctx.on_run_end = _chain(svc.ctx.on_run_end, ends)
    start_worker(svc, svc.worker)
    try:
        yield svc
    finally:
        await shutdown(svc)


def _chain(
    first: Callable[[str], Awaitable[None]] | None, then: Callable[[str], Awaitable[None]]
) -> Callable[[str], Awaitable[None]]:
    """An end-of-run hook that runs the services' own hook (trace export, if set), then ours."""

    async def on_run_end(run_id: str) -> None:
        try:
            if first is not None:
                await first(run_id)
        finally:
            await then(run_id)

    return on_run_end


async def one_run(svc: Services, ends: RunEnds, skill: str, tag: str, calls: int) -> Run:
    """Start a run of `calls` echo calls and wait until it is done."""
    run = await svc.runs.start(skill, f"bench {tag} {calls}", trigger="bench", by=BENCH)
    return await ends.wait(svc.store, run.id)


def step_figures(runs: list[list[Event]]) -> dict[str, float]:
    """Per step (model call), summed over the runs. Also the median run's step time, and how
    many runs stalled: their first step began more than half a second after they were made
    (a wake-up the worker missed shows here as a wait of one poll interval)."""
    wall = model = tool = 0.0
    steps = calls = stalled = 0
    per_run: list[float] = []
    for events in runs:
        started = first_event(events, RunStarted).at
        run_ms = _ms(started, events[-1].at)
        wall += run_ms
        first_call = first_event(events, ModelCall)
        assert isinstance(first_call.payload, ModelCall)
        if _ms(started, first_call.at) - first_call.payload.latency_ms > 500:
            stalled += 1
        n = 0
        for e in events:
            match e.payload:
                case ModelCall(latency_ms=latency):
                    model += latency
                    n += 1
                case ToolResult(duration_ms=duration):
                    tool += duration
                    calls += 1
                case _:
                    pass
        steps += n
        per_run.append(run_ms / n)
    return {
        "steps": steps,
        "tool_calls": calls,
        "step_ms": wall / steps,
        "overhead_ms": (wall - model - tool) / steps,
        "model_ms": model / steps,
        "tool_ms": tool / max(calls, 1),
        "median_run_step_ms": percentile(per_run, 50),
        "runs_stalled": stalled,
    }


async def bench_steps(
    model: ModelProcess,
    url: str,
    work: Path,
    skills: Path,
    sizes: Sizes,
    *,
    profile: Path | None,
) -> dict[str, float]:
    """Runs of four tool steps and an answer, one at a time, timed by their own events."""
    ends = RunEnds()
    async with engine_here(url, work, skills, ends=ends) as svc:
        # Not timed: the first run imports the model client and starts the MCP server.
        await one_run(svc, ends, "bench-auto", f"warm-{uuid.uuid4().hex[:6]}", 2)
        await model.forget()
        profiler = None
        if profile is not None:
            import cProfile

            profiler = cProfile.Profile()
            profiler.enable()
        ids = []
        for k in range(max(1, sizes.steps // STEP_RUN_CALLS)):
            run = await one_run(svc, ends, "bench-auto", f"s{k}", STEP_RUN_CALLS - 1)
            ids.append(run.id)
        if profiler is not None and profile is not None:
            profiler.disable()
            profiler.dump_stats(profile)
            _write_profile_text(profile)
        figures = step_figures([await svc.store.events(i) for i in ids])
        requests, connections = await model.calls()
        figures["tcp_connections_per_model_call"] = connections / requests if requests else 0.0
        await model.forget()
        return figures


def _write_profile_text(path: Path) -> None:
    import io
    import pstats

    out = io.StringIO()
    stats = pstats.Stats(str(path), stream=out)
    stats.sort_stats("cumulative").print_stats(60)
    stats.sort_stats("tottime").print_stats(40)
    path.with_suffix(".txt").write_text(out.getvalue())


async def make_waiting(svc: Services, n: int, tag: str, *, expect: int) -> None:
    """Start `n` runs that ask before their tool call; return once `expect` runs wait."""
    for k in range(n):
        await svc.runs.start("bench-ask", f"bench {tag}{k} 1", trigger="bench", by=BENCH)
    timeout = 30 + n * 0.1
    await wait_count(svc.store, RunStatus.WAITING, expect, timeout=timeout, what="waiting runs")


async def time_decisions(svc: Services, ends: RunEnds, items: list[Item]) -> dict[str, float]:
    """Approve each item, one at a time: decide() → the tool body's own clock (and → its
    TOOL_STARTED event), each run waited to its end before the next decision."""
    to_body: list[float] = []
    to_started: list[float] = []
    for item in items:
        t0 = time.time()
        await svc.inbox.decide(item.id, Approve(), by=BENCH)
        await ends.wait(svc.store, item.run_id, 60)
        events = await svc.store.events(item.run_id)
        started = first_event(events, ToolStarted).at.timestamp()
        result = first_event(events, ToolResult).payload
        assert isinstance(result, ToolResult)
        body = tool_body(result)["t"]
        to_body.append((body - t0) * 1000)
        to_started.append((started - t0) * 1000)
    return {
        "samples": len(to_body),
        "p50_ms": percentile(to_body, 50),
        "p99_ms": percentile(to_body, 99),
        "max_ms": max(to_body),
        "started_p50_ms": percentile(to_started, 50),
        "started_p99_ms": percentile(to_started, 99),
    }


async def bench_decisions(
    model: ModelProcess, url: str, work: Path, skills: Path, sizes: Sizes
) -> dict[str, float]:
    """Make `waiting + samples` runs wait on a decision, then decide `samples` of them one at
    a time: decide() → the tool body's own clock, with `waiting` others still waiting."""
    ends = RunEnds()
    async with engine_here(url, work, skills, ends=ends) as svc:
        await one_run(svc, ends, "bench-auto", f"warm-{uuid.uuid4().hex[:6]}", 1)
        total = sizes.waiting + sizes.samples
        await make_waiting(svc, total, "d", expect=total)
        await model.forget()
        items = await svc.store.list_items(box=Box.ACTION, status=ItemStatus.PENDING, limit=total)
        figures = await time_decisions(svc, ends, items[: sizes.samples])
        still = await count_status(svc.store, RunStatus.WAITING)
        await model.forget()
        return figures | {"waiting": still}


async def bench_memory(
    model: ModelProcess, url: str, work: Path, skills: Path, sizes: Sizes
) -> dict[str, float]:
    """Resident memory of an engine process before and after `memory_runs` runs are made to
    wait on a decision. The process is a fresh one that does nothing else, so memory that
    earlier parts of the bench used and freed (and the allocator kept) cannot hide a growth.

    The runs are started in batches, and the warm-up before the first reading is one batch of
    the same size: a batch in flight (its queued runs, their tasks and buffers) costs memory
    that is freed when it settles but that the allocator keeps as its high-water mark. Warmed
    with a smaller batch, that one-off mark (~3 MiB for 500 runs) was counted as if the
    waiting runs held it; warmed with the same batch, only what stays per waiting run counts."""
    config = {
        "url": url,
        "work": str(work),
        "skills": str(skills),
        "runs": sizes.memory_runs,
        "batch": min(MEMORY_BATCH, sizes.memory_runs // 10),
    }
    return await json_child("bench.engine:memory_child", config, model, what="memory child")


def memory_child(config_json: str) -> None:
    """The engine process of `bench_memory`: prints its figures as one JSON line."""
    config = json.loads(config_json)
    print(json.dumps(asyncio.run(_memory(config))))


async def _memory(config: dict[str, Any]) -> dict[str, float]:
    runs, batch = int(config["runs"]), int(config["batch"])
    async with engine_here(config["url"], Path(config["work"]), Path(config["skills"])) as svc:
        # Warm every path a waiting run takes (imports, pools, caches) before the baseline.
        for k in range(batch):
            await svc.runs.start("bench-ask", f"bench mw{k} 1", trigger="bench", by=BENCH)
        await wait_count(svc.store, RunStatus.WAITING, batch, timeout=300, what="warm-up")
        gc.collect()
        before, blocks_before = rss_bytes(), sys.getallocatedblocks()
        made = 0
        while made < runs:
            n = min(batch, runs - made)
            for k in range(made, made + n):
                await svc.runs.start("bench-ask", f"bench m{k} 1", trigger="bench", by=BENCH)
            made += n
            await wait_count(
                svc.store,
                RunStatus.WAITING,
                batch + made,
                timeout=60 + n * 0.2,
                what="waiting runs",
                interval=0.2,
            )
        gc.collect()
        after, blocks_after = rss_bytes(), sys.getallocatedblocks()
    delta = after - before
    return {
        "waiting": runs,
        "batch": batch,
        "rss_before_mib": before / MIB,
        "rss_after_mib": after / MIB,
        "delta_mib": delta / MIB,
        "per_10000_mib": delta / MIB * 10_000 / runs,
        "per_run_kib": delta / 1024 / runs,
        # Python objects still allocated per waiting run (should be ~0: a waiting run is rows).
        "python_blocks_per_run": (blocks_after - blocks_before) / runs,
    }
