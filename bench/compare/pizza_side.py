"""Pizza Bot's side of `pizzabot bench --compare langgraph`: the same parts as
`langgraph_side`, with the engine built as `pizzabot serve` builds it.

Steps and decisions run the engine in the bench's process (as `pizzabot bench` does); memory and
500 runs in flight run in a fresh process each, so what other parts left behind cannot hide a
growth or a peak; start-up times `pizzabot serve` itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import resource
import signal
import sys
import time
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from bench.engine import (
    STEP_RUN_CALLS,
    RunEnds,
    Sizes,
    bench_decisions,
    bench_memory,
    child_env,
    engine_here,
    free_port,
    json_child,
    one_run,
    percentile,
    step_figures,
)
from bench.model import ModelProcess
from bench.procs import Child, _first_run, _wait_answer
from pizzabot.agent.events import ModelCall, ToolResult
from pizzabot.agent.model import RunStatus
from pizzabot.agent.policy.principal import Principal

MIB = 1024 * 1024


def cpu_seconds(roots: list[int], *, leave_out: Iterable[int] = ()) -> float:
    """CPU time used so far by these processes and their descendants, less the trees under
    `leave_out` (the model server is a child of the bench's process, and counted apart)."""
    import psutil

    total = 0.0
    seen: set[int] = set()
    skip: set[int] = set()
    for pid in leave_out:
        with contextlib.suppress(psutil.Error):
            proc = psutil.Process(pid)
            skip.update(p.pid for p in [proc, *proc.children(recursive=True)])
    for pid in roots:
        with contextlib.suppress(psutil.Error):
            proc = psutil.Process(pid)
            for p in [proc, *proc.children(recursive=True)]:
                if p.pid in seen or p.pid in skip:
                    continue
                seen.add(p.pid)
                with contextlib.suppress(psutil.Error):
                    t = p.cpu_times()
                    total += t.user + t.system
    return total


def engine_cpu(model: ModelProcess) -> float:
    """The engine (this process), its MCP servers, and the model server: CPU seconds so far."""
    return cpu_seconds([os.getpid()], leave_out={model.pid}) + cpu_seconds([model.pid])


async def steps(
    model: ModelProcess, work: Path, skills: Path, steps: int, cpu_runs: int
) -> dict[str, Any]:
    """Runs of four tool steps and an answer, one at a time; then `cpu_runs` runs of one tool
    call and an answer, with the CPU time they cost every process involved."""
    ends = RunEnds()
    url = f"sqlite+aiosqlite:///{work / 'steps.db'}"
    async with engine_here(url, work / "steps", skills, ends=ends) as svc:
        await one_run(svc, ends, "bench-auto", f"warm-{uuid.uuid4().hex[:6]}", 2)
        ids = []
        for k in range(max(1, steps // STEP_RUN_CALLS)):
            run = await one_run(svc, ends, "bench-auto", f"s{k}", STEP_RUN_CALLS - 1)
            ids.append(run.id)
        figures: dict[str, Any] = dict(step_figures([await svc.store.events(i) for i in ids]))
        before = engine_cpu(model)
        for k in range(cpu_runs):
            await one_run(svc, ends, "bench-auto", f"c{k}", 1)
        figures["cpu_ms_per_run"] = (engine_cpu(model) - before) * 1000 / cpu_runs
    await model.forget()
    return figures


async def decisions(
    model: ModelProcess, work: Path, skills: Path, waiting: int, samples: int
) -> dict[str, Any]:
    sizes = Sizes(
        steps=0, waiting=waiting, samples=samples, memory_runs=0, throughput_runs=0, starts=0
    )
    url = f"sqlite+aiosqlite:///{work / 'decisions.db'}"
    return dict(await bench_decisions(model, url, work / "decisions", skills, sizes))


async def memory(model: ModelProcess, work: Path, skills: Path, runs: int) -> dict[str, Any]:
    sizes = Sizes(steps=0, waiting=0, samples=0, memory_runs=runs, throughput_runs=0, starts=0)
    url = f"sqlite+aiosqlite:///{work / 'memory.db'}"
    return dict(await bench_memory(model, url, work / "memory", skills, sizes))


# -- runs in flight, in a fresh process ---------------------------------------------------


async def inflight(
    model: ModelProcess, work: Path, skills: Path, runs: int, delay_ms: int
) -> dict[str, Any]:
    """`runs` runs of one tool call started at once against a model that takes `delay_ms` to
    answer, the worker carrying all of them at once, in a fresh engine process."""
    config = {
        "url": f"sqlite+aiosqlite:///{work / 'inflight.db'}",
        "work": str(work / "inflight"),
        "skills": str(skills),
        "runs": runs,
        "delay_ms": delay_ms,
    }
    return await json_child(
        "bench.compare.pizza_side:inflight_child", config, model, what="in-flight child"
    )


def inflight_child(config_json: str) -> None:
    """The engine process of `inflight`: prints its figures as one JSON line."""
    print(json.dumps(asyncio.run(_inflight(json.loads(config_json)))))


async def _inflight(config: dict[str, Any]) -> dict[str, Any]:
    n, delay = int(config["runs"]), int(config["delay_ms"])
    ends = RunEnds(keep=n + 10)
    work, skills = Path(config["work"]), Path(config["skills"])
    async with engine_here(config["url"], work, skills, ends=ends, concurrency=n) as svc:
        await one_run(svc, ends, "bench-auto", "warm", 1)
        ids = []
        for k in range(n):
            run = await svc.runs.start(
                "bench-auto", f"bench i{k} 1 {delay}", trigger="bench", by=Principal.owner("api")
            )
            ids.append(run.id)
        await asyncio.gather(*(ends.wait(svc.store, i, 60 + n * 0.1) for i in ids))
        walls: list[float] = []
        overhead: list[float] = []
        first = last = None
        for run_id in ids:
            run = await svc.store.get_run(run_id)
            assert run.status is RunStatus.DONE and run.finished_at is not None
            wall = (run.finished_at - run.created_at).total_seconds() * 1000
            spent = 0.0
            for e in await svc.store.events(run_id):
                if isinstance(e.payload, ModelCall):
                    spent += e.payload.latency_ms
                elif isinstance(e.payload, ToolResult):
                    spent += e.payload.duration_ms
            walls.append(wall)
            overhead.append(wall - spent)
            first = run.created_at if first is None else min(first, run.created_at)
            last = run.finished_at if last is None else max(last, run.finished_at)
    assert first is not None and last is not None
    return {
        "runs": n,
        "runs_per_s": n / (last - first).total_seconds(),
        "wall_p50_s": percentile(walls, 50) / 1000,
        "wall_p99_s": percentile(walls, 99) / 1000,
        "overhead_p99_ms": percentile(overhead, 99),
        # ru_maxrss is in KiB on Linux: the process's peak, start-up included.
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


# -- start-up ------------------------------------------------------------------------------


def _serve(work: Path, skills: Path, name: str, token: str) -> tuple[Child, str]:
    port = free_port()
    child = Child(
        name=name,
        args=["serve"],
        env=child_env(
            {
                "PIZZABOT_DATA_DIR": str(work / name),
                "PIZZABOT_SKILLS_DIR": str(skills),
                "PIZZABOT_PORT": str(port),
                "PIZZABOT_API_TOKEN": token,
            }
        ),
        log=work / f"{name}.log",
    )
    return child, f"http://127.0.0.1:{port}"


async def _warmed(child: Child) -> None:
    """Until the server's warm-up is done: the skills' MCP servers started (the tool server
    appears as its child process) and the skills' model library imported (beside the MCP
    servers' start: done once the resident memory stops growing)."""
    import psutil

    proc = psutil.Process(child.pid)
    started = False
    while not started:
        child.check()
        if time.perf_counter() - child.started > 60:
            raise TimeoutError(f"serve never started its MCP server:\n{child.tail()}")
        with contextlib.suppress(psutil.Error):
            started = any(
                "bench.tools" in " ".join(p.cmdline()) for p in proc.children(recursive=True)
            )
        await asyncio.sleep(0.05)
    last = proc.memory_info().rss
    while True:
        await asyncio.sleep(0.5)
        now = proc.memory_info().rss
        if now - last < MIB:
            return
        last = now


async def start(work: Path, skills: Path) -> dict[str, Any]:
    """`pizzabot serve` start → `/readyz`, → a first run (posted when `/readyz` answers) done; in another
    start, the server's resident memory once it is warm and before any run; and the model
    library's import alone in a fresh process."""
    import psutil

    token = "bench-token-" + uuid.uuid4().hex
    tag = uuid.uuid4().hex[:6]
    child, base = _serve(work, skills, f"serve-first-{tag}", token)
    child.start()
    try:
        ready = await _wait_answer(child, f"{base}/readyz", "/readyz")
        first = await _first_run(child, base, token)
    finally:
        child.stop(signal.SIGTERM)
    child, base = _serve(work, skills, f"serve-rss-{tag}", token)
    child.start()
    try:
        await _wait_answer(child, f"{base}/readyz", "/readyz")
        await _warmed(child)
        await asyncio.sleep(1.0)  # the MCP session's handshake, the loop settling
        rss = psutil.Process(child.pid).memory_info().rss / MIB
    finally:
        child.stop(signal.SIGTERM)
    return {
        "ready_s": ready,
        "first_run_s": first,
        "rss_before_run_mib": rss,
        "model_import_s": await model_import_s(),
    }


async def model_import_s() -> float:
    """The bench skills' model library alone, in a fresh process (the first run waits for
    it): `openai/` models with options the OpenAI SDK knows go through the SDK, not litellm."""
    code = "import time; t = time.perf_counter(); import openai; print(time.perf_counter() - t)"
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        code,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
        env=child_env({}),
    )
    out, _ = await proc.communicate()
    return float(out.decode().strip().splitlines()[-1])


async def alone(
    model: ModelProcess,
    work: Path,
    skills: Path,
    *,
    steps: int,
    crowd: int,
    crowd_wait_s: float,
    samples: int,
    postgres: str | None,
) -> dict[str, Any]:
    """Figures with a target of their own and nothing to compare on LangGraph's side: a
    decision → its request's long-poll answered while `crowd` others wait (`bench.requests_path`),
    and the engine's overhead per step on PostgreSQL ÷ on SQLite (`postgres`: a server the bench
    may make a scratch database on; None leaves it out)."""
    from bench.engine import Sizes as EngineSizes
    from bench.engine import bench_steps
    from bench.procs import scratch_postgres
    from bench.requests_path import bench_requests_path

    polls = (await bench_requests_path(work, (crowd,), samples, wait=crowd_wait_s))[str(crowd)]
    out: dict[str, Any] = {"wake_p50_ms": polls["wake_p50_ms"], "wake_p99_ms": polls["wake_p99_ms"]}
    if postgres is None:
        return out
    sizes = EngineSizes(
        steps=steps, waiting=0, samples=0, memory_runs=0, throughput_runs=0, starts=0
    )
    lite = await bench_steps(
        model,
        f"sqlite+aiosqlite:///{work / 'steps.db'}",
        work / "lite",
        skills,
        sizes,
        profile=None,
    )
    async with scratch_postgres(postgres) as url:
        pg = await bench_steps(model, url, work / "pg", skills, sizes, profile=None)
    out["overhead_ms_sqlite"] = lite["overhead_ms"]
    out["overhead_ms_postgres"] = pg["overhead_ms"]
    out["pg_vs_sqlite"] = pg["overhead_ms"] / lite["overhead_ms"]
    return out
