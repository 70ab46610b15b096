"""The parts of `pizzabot bench` that time other processes: `pizzabot worker` processes sharing
PostgreSQL (runs per second, runs executed twice) and `pizzabot serve` starting. See
`bench.runner` for what the figures mean.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import platform
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bench.engine import (
    Sizes,
    child_env,
    count_status,
    first_event,
    free_port,
    tool_body,
    write_skills,
)
from bench.model import ModelProcess
from pizzabot.agent.events import RunFinished, RunStarted, ToolResult, ToolStarted
from pizzabot.agent.model import RunStatus
from pizzabot.agent.policy.principal import Principal
from pizzabot.bot.services import Services
from pizzabot.store.sql import SqlStore


def _pizzabot() -> list[str]:
    """The `pizzabot` a user runs: the console script next to this interpreter, if any."""
    script = Path(sys.executable).with_name("pizzabot")
    return [str(script)] if script.exists() else [sys.executable, "-m", "pizzabot.bot.main"]


@dataclass
class Child:
    """A `pizzabot` subprocess in its own process group. Its MCP servers run in sessions of
    their own and exit when it does (their stdin closes)."""

    name: str
    args: list[str]
    env: dict[str, str]
    log: Path
    proc: subprocess.Popen[bytes] | None = None
    started: float = 0.0

    def start(self) -> None:
        with open(self.log, "ab") as out:
            self.started = time.perf_counter()
            self.proc = subprocess.Popen(
                [*_pizzabot(), *self.args],
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def check(self) -> None:
        if self.proc is not None and self.proc.poll() is not None:
            raise RuntimeError(f"{self.name} exited {self.proc.returncode}:\n{self.tail()}")

    def tail(self) -> str:
        try:
            return self.log.read_text(errors="replace")[-3000:]
        except OSError:
            return ""

    def stop(self, sig: int = signal.SIGINT, timeout: float = 15.0) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        if proc.poll() is None:
            proc.send_signal(sig)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout)
        # Whatever is left of the group (a stuck child, an MCP server) goes too.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(5)


@contextlib.asynccontextmanager
async def scratch_postgres(admin: str) -> AsyncIterator[str]:
    """A new, empty database on the server `admin` points at; dropped afterwards."""
    import asyncpg
    from sqlalchemy.engine import make_url

    url = make_url(admin)
    plain = url.set(drivername="postgresql").render_as_string(hide_password=False)
    name = f"pizzabot_bench_{uuid.uuid4().hex[:10]}"
    conn = await asyncpg.connect(plain)
    try:
        await conn.execute(f'CREATE DATABASE "{name}"')
    finally:
        await conn.close()
    try:
        yield url.set(drivername="postgresql+asyncpg", database=name).render_as_string(
            hide_password=False
        )
    finally:
        conn = await asyncpg.connect(plain)
        try:
            await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            await conn.close()


@dataclass
class Phase:
    workers: int
    runs: int
    seconds: float
    by_worker: dict[str, int] = field(default_factory=dict)
    #: CPU seconds per second of the phase, by who used them (1.0 is one core, fully).
    cores: dict[str, float] = field(default_factory=dict)

    @property
    def rate(self) -> float:
        return self.runs / self.seconds

    @property
    def cpu_ms_per_run(self) -> float:
        """CPU time the whole machine spent per run finished (every process: the workers,
        PostgreSQL, the model server, the bench)."""
        return self.cores.get("machine", 0.0) / self.rate * 1000


def cpu_seconds(children: list[Child], model: ModelProcess) -> dict[str, float]:
    """CPU time used so far by each worker (with its MCP servers), the bench and its scripted
    model server (this process and that one), PostgreSQL, and the whole machine."""
    import psutil

    def tree(proc: psutil.Process) -> float:
        total = 0.0
        for p in [proc, *proc.children(recursive=True)]:
            with contextlib.suppress(psutil.Error):
                t = p.cpu_times()
                total += t.user + t.system
        return total

    used: dict[str, float] = {}
    for child in children:
        with contextlib.suppress(psutil.Error):
            used[child.name] = tree(psutil.Process(child.pid))
    me = psutil.Process().cpu_times()
    used["bench + model server"] = me.user + me.system
    with contextlib.suppress(psutil.Error):
        used["bench + model server"] += tree(psutil.Process(model.pid))
    pg = 0.0
    for p in psutil.process_iter(["name", "cpu_times"]):
        if (p.info["name"] or "").startswith("postgres") and p.info["cpu_times"] is not None:
            pg += p.info["cpu_times"].user + p.info["cpu_times"].system
    used["postgres"] = pg
    machine = psutil.cpu_times()
    used["machine"] = machine.user + machine.system + getattr(machine, "nice", 0.0)
    return used


async def _run_batch(
    client: Services, children: list[Child], prefix: str, n: int, timeout: float
) -> list[str]:
    since = client.ctx.clock()
    ids = []
    for k in range(n):
        run = await client.runs.start(
            "bench-auto", f"bench {prefix}{k} 1", trigger="bench", by=Principal.owner("api")
        )
        ids.append(run.id)
    deadline = time.monotonic() + timeout
    # Nothing else makes runs meanwhile: the runs made since `since` are this batch.
    while await count_status(client.store, RunStatus.DONE, since=since) < n:
        for child in children:
            child.check()
        if time.monotonic() > deadline:
            raise TimeoutError(f"{prefix}: runs not done after {timeout:.0f}s")
        await asyncio.sleep(0.05)
    return ids


async def _ran_on(store: SqlStore, ids: list[str]) -> Counter[int]:
    """Which worker process ran each run's tool call (the echo server's parent)."""
    seen: Counter[int] = Counter()
    for run_id in ids:
        for e in await store.events(run_id):
            if isinstance(e.payload, ToolResult):
                seen[int(tool_body(e.payload)["ppid"])] += 1
    return seen


async def _phase(
    client: Services, children: list[Child], model: ModelProcess, label: str, n: int
) -> tuple[Phase, list[str]]:
    before, t0 = cpu_seconds(children, model), time.perf_counter()
    ids = await _run_batch(client, children, f"t{label}-", n, timeout=60 + n)
    after, elapsed = cpu_seconds(children, model), time.perf_counter() - t0
    cores = {k: round((after[k] - before.get(k, 0.0)) / elapsed, 2) for k in after}
    runs = [await client.store.get_run(i) for i in ids]
    start = min(r.created_at for r in runs)
    end = max(r.finished_at for r in runs if r.finished_at is not None)
    names = {c.pid: c.name for c in children}
    by = await _ran_on(client.store, ids)
    return (
        Phase(
            workers=len(children),
            runs=n,
            seconds=(end - start).total_seconds(),
            by_worker={names.get(pid, str(pid)): count for pid, count in by.items()},
            cores=cores,
        ),
        ids,
    )


async def _warm_workers(client: Services, children: list[Child], label: str) -> None:
    """Feed runs until every worker has run one: its model client imported, its MCP server
    started."""
    want = {c.pid for c in children}
    for round_ in range(20):
        ids = await _run_batch(client, children, f"w{label}{round_}-", 4 * len(children), 180)
        if want <= set(await _ran_on(client.store, ids)):
            return
    raise RuntimeError("a worker never took a run:\n" + "\n".join(c.tail() for c in children))


def _read_lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


async def executed_twice(store: SqlStore, ids: list[str], tools_log: Path) -> dict[str, int]:
    """Runs that show a double execution: a call started twice, a run finished twice, or the
    tool body itself running twice for one call (from its own log)."""
    doubled: set[str] = set()
    tags: dict[str, str] = {}
    for run_id in ids:
        events = await store.events(run_id)
        starts = Counter(e.payload.call_id for e in events if isinstance(e.payload, ToolStarted))
        finishes = sum(1 for e in events if isinstance(e.payload, RunFinished))
        if finishes > 1 or any(n > 1 for n in starts.values()):
            doubled.add(run_id)
        started = first_event(events, RunStarted).payload
        assert isinstance(started, RunStarted)
        tags[started.input.split()[1]] = run_id
    bodies: Counter[tuple[str, int]] = Counter()
    for line in await asyncio.to_thread(_read_lines, tools_log):
        data = json.loads(line)
        bodies[(data["tag"], data["i"])] += 1
    body_twice = {tags[tag] for (tag, _), n in bodies.items() if n > 1 and tag in tags}
    return {
        "runs": len(doubled | body_twice),
        "by_events": len(doubled),
        "by_tool_log": len(body_twice),
    }


async def bench_workers(
    model: ModelProcess,
    admin: str,
    work: Path,
    sizes: Sizes,
) -> dict[str, Any]:
    """Runs finished per second by two, then one `pizzabot worker` process on PostgreSQL."""
    from pizzabot.bot.server import build, shutdown
    from pizzabot.bot.settings import Settings

    skills = work / "skills-workers"
    tools_log = work / "workers-tools.jsonl"
    write_skills(skills, model.openai_base, tools_log=tools_log)
    async with scratch_postgres(admin) as url:
        # The client only starts runs (as a `serve --no-worker` would); building it migrates.
        client = await build(
            Settings(database_url=url, data_dir=work / "client", skills_dir=skills),
            token="bench",
            with_worker=False,
        )
        children = [
            Child(
                name=f"worker-{i}",
                args=["worker"],
                env=child_env(
                    {
                        "PIZZABOT_DATABASE_URL": url,
                        "PIZZABOT_SKILLS_DIR": str(skills),
                        "PIZZABOT_DATA_DIR": str(work / f"worker-{i}"),
                        "PIZZABOT_WORKER_CONCURRENCY": "8",
                    }
                ),
                log=work / f"worker-{i}.log",
            )
            for i in (1, 2)
        ]
        try:
            for child in children:
                child.start()
            await _warm_workers(client, children, "a")
            await model.counting(True)
            two, ids2 = await _phase(client, children, model, "2w", sizes.throughput_runs)
            children[1].stop()
            one, ids1 = await _phase(client, children[:1], model, "1w", sizes.throughput_runs)
            twice = await executed_twice(client.store, ids1 + ids2, tools_log)
        finally:
            for child in children:
                child.stop()
            await shutdown(client)
            await model.counting(False)  # the later parts are timed: no counting there
        repeated = sum(1 for n in (await model.asked()).values() if n > 1)
        await model.forget()
    machine_one = one.cores.get("machine", 0.0)
    return {
        "one": asdict(one) | {"runs_per_s": one.rate, "cpu_ms_per_run": one.cpu_ms_per_run},
        "two": asdict(two) | {"runs_per_s": two.rate, "cpu_ms_per_run": two.cpu_ms_per_run},
        "speedup": two.rate / one.rate,
        # What two workers could give on this machine with every core busy, if a run cost the
        # same CPU (all processes) as with one; not a hard bound (busier loops batch more).
        "speedup_headroom": (os.cpu_count() or 1) / machine_one if machine_one else None,
        "executed_twice": twice,
        "model_steps_asked_twice": repeated,
    }


def _get(url: str, token: str | None = None, timeout: float = 1.0) -> dict[str, Any] | None:
    import httpx

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        r = httpx.get(url, headers=headers, timeout=timeout)
    except httpx.HTTPError:
        return None
    if r.status_code != 200:
        return None
    data: dict[str, Any] = r.json()
    return data


async def _first_run(child: Child, base: str, token: str) -> float:
    import httpx

    async with httpx.AsyncClient(
        base_url=base, headers={"Authorization": f"Bearer {token}"}, timeout=30
    ) as c:
        r = await c.post("/api/runs", json={"skill": "bench-auto", "input": "bench f 1"})
        r.raise_for_status()
        run_id = r.json()["id"]
        while (await c.get(f"/api/runs/{run_id}")).json()["status"] != "done":
            child.check()
            if time.perf_counter() - child.started > 120:
                raise TimeoutError(f"first run not done:\n{child.tail()}")
            await asyncio.sleep(0.01)
    return time.perf_counter() - child.started


async def _wait_answer(child: Child, url: str, what: str) -> float:
    """Seconds from the child's start until `url` answers 200."""
    while await asyncio.to_thread(_get, url, None, 0.5) is None:
        child.check()
        if time.perf_counter() - child.started > 60:
            raise TimeoutError(f"serve: no {what}:\n{child.tail()}")
        await asyncio.sleep(0.005)
    return time.perf_counter() - child.started


async def bench_start(
    model: ModelProcess, work: Path, sizes: Sizes, *, first_run: bool
) -> dict[str, Any]:
    """`pizzabot serve` on a fresh SQLite data folder: start → `/healthz` answering (alive),
    start → `/readyz` (the app built and started), and in full mode start → a first run done,
    the model client's import and the MCP server's start included."""
    skills = work / "skills-serve"
    write_skills(skills, model.openai_base, tools_log=None)
    alive: list[float] = []
    ready: list[float] = []
    first: float | None = None
    token = "bench-token-" + uuid.uuid4().hex
    # Start 0 is not timed: it leaves what a second start of an installed server finds
    # (compiled bytecode, the operating system's file cache). Quick mode skips it.
    untimed = 0 if sizes.starts == 1 else 1
    for i in range(1 - untimed, sizes.starts + 1):
        port = free_port()
        child = Child(
            name=f"serve-{i}",
            args=["serve"],
            env=child_env(
                {
                    "PIZZABOT_DATA_DIR": str(work / f"serve-{i}"),
                    "PIZZABOT_SKILLS_DIR": str(skills),
                    "PIZZABOT_PORT": str(port),
                    "PIZZABOT_API_TOKEN": token,
                }
            ),
            log=work / f"serve-{i}.log",
        )
        base = f"http://127.0.0.1:{port}"
        child.start()
        try:
            healthz = await _wait_answer(child, f"{base}/healthz", "/healthz")
            readyz = await _wait_answer(child, f"{base}/readyz", "/readyz")
            if i > 0:
                alive.append(healthz)
                ready.append(readyz)
            if first_run and i == 1:
                first = await _first_run(child, base, token)
        finally:
            child.stop(signal.SIGTERM)
    return {
        "healthz_samples_s": alive,
        "readyz_samples_s": ready,
        "median_s": sorted(alive)[len(alive) // 2],
        "ready_median_s": sorted(ready)[len(ready) // 2],
        "first_run_s": first,
    }


def machine() -> dict[str, Any]:
    """What a report says of the machine it was measured on."""
    return {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "load_average": list(os.getloadavg()),
    }
