"""`pizzabot bench`: how fast the engine is, measured the same way every time.

A fixed workload runs against the scripted model server (`pizzabot.agent.testing.model_server`, in a
process of its own as a real provider is: `bench.model`; reached through the client
Pizza Bot picks for its `openai/` model, the OpenAI SDK, one new TCP connection per request,
as in the comparison with LangGraph) and a tool that does nothing (`bench.tools`). The
figures, printed next to the targets, and written as JSON:

- per model(+tool) step: wall time, and the engine's own share of it (wall time minus the
  model and tool time the run's events record: MODEL_CALL latency_ms, TOOL_RESULT duration_ms),
  on SQLite and on PostgreSQL, with the engine in this process;
- decision → the approved tool call's body runs (its own timestamp), p50 and p99, while many
  other runs wait on a decision;
- resident memory of an engine process before and after many runs are made to wait;
- with 100,000 runs waiting (copied in the database, `bench.waiting`): decision → the tool
  body, and an engine process's memory growth;
- runs finished per second by one and by two `pizzabot worker` processes on PostgreSQL, and
  how many runs were executed twice (must be 0);
- `pizzabot serve` start → `/healthz` answering;
- decisions through the channels of a real `pizzabot serve` (`bench.channels`): a Slack
  click's POST, the web page's form POST, an emailed reply accepted by SMTP → the tool body;
  a decision POST → a request's long-poll answered;
- the request path with a crowd of agents waiting on long-polls (`bench.requests_path`);
- a decision's fan-out to every other copy of its card: Slack, the web page, mail
  (`bench.fanout`).

`--quick` uses small counts so CI can run it and the bench cannot rot; its figures are a smoke
test, not a measurement. `python -m bench` is the same command as `pizzabot bench`; the server does not need
the bench, and psutil, which it reads processes with, comes with requirements-dev.lock (the `bench` extra).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from bench.channels import bench_channels
from bench.engine import (
    Sizes,
    bench_decisions,
    bench_memory,
    bench_steps,
    child_env,
    write_skills,
)
from bench.fanout import bench_fanout
from bench.model import ModelProcess
from bench.procs import bench_start, bench_workers, machine, scratch_postgres
from bench.requests_path import bench_requests_path
from bench.targets import ROWS, TARGETS, crowd_figures, fanout_figures, waiting_figures
from bench.waiting import bench_many_waiting
from pizzabot.cli.client import CliError

DEFAULT_OUTPUT = Path("bench-output/bench.json")
DEFAULT_POSTGRES = "postgresql://postgres@127.0.0.1:5432/postgres"

err = Console(stderr=True)


FULL = Sizes(
    steps=200,
    waiting=1000,
    samples=200,
    memory_runs=10_000,
    throughput_runs=1000,
    starts=3,
    channel_samples=100,
    crowds=(100, 1000),
    fanout_waiting=1000,
    many_waiting=100_000,
    many_samples=300,
)
QUICK = Sizes(
    steps=20,
    waiting=50,
    samples=20,
    memory_runs=100,
    throughput_runs=30,
    starts=1,
    channel_samples=5,
    crowds=(10, 100),
    crowd_wait_s=3,
    fanout_waiting=20,
    many_waiting=1000,
    many_samples=20,
)


# -- the whole bench ---------------------------------------------------------------------


SECTIONS_ALL = (
    "workers",
    "steps",
    "decisions",
    "memory",
    "waiting",
    "start",
    "channels",
    "requests",
    "fanout",
)


@dataclass
class Options:
    quick: bool = False
    output: Path = DEFAULT_OUTPUT
    postgres: str | None = DEFAULT_POSTGRES  # None: skip the PostgreSQL figures
    profile: bool = False
    keep: bool = False  # keep the work folder (logs, databases) for a look afterwards
    sections: tuple[str, ...] = SECTIONS_ALL
    crowds: tuple[int, ...] = ()  # more sizes of the request path's crowd


def _bytecode_cache(work: Path) -> None:
    """Cache compiled bytecode even where PYTHONDONTWRITEBYTECODE is set (as in some sandboxes):
    an installed Pizza Bot has its .pyc files, and a process that compiles every module it
    imports would time the compiler. Children get the same cache through the environment."""
    if not sys.dont_write_bytecode:
        return
    cache = work / "pycache"
    cache.mkdir(exist_ok=True)
    sys.pycache_prefix = str(cache)
    sys.dont_write_bytecode = False
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    os.environ["PYTHONPYCACHEPREFIX"] = str(cache)
    # What this process imported before now was compiled and not kept: keep it for the children.
    import importlib.util
    import py_compile

    for module in list(sys.modules.values()):
        source = getattr(module, "__file__", None)
        if source and source.endswith(".py"):
            with contextlib.suppress(Exception):
                py_compile.compile(source, cfile=importlib.util.cache_from_source(source))


@dataclass
class _Run:
    """One bench run's place and what it found so far."""

    opts: Options
    sizes: Sizes
    work: Path
    details: dict[str, Any]

    def prof(self, name: str) -> Path | None:
        """Where a part's cProfile output goes, with --profile."""
        return self.opts.output.parent / f"{name}.prof" if self.opts.profile else None

    def wants(self, part: str) -> bool:
        return part in self.opts.sections

    @contextlib.contextmanager
    def section(self, name: str, what: str) -> Iterator[None]:
        """One part of the bench; a part that fails is reported and the others still run,
        so a long run keeps what it measured."""
        err.print(f"[dim]bench: {what} …[/]")
        t0 = time.perf_counter()
        try:
            yield
        except Exception as exc:
            import traceback

            self.details["errors"][name] = "".join(traceback.format_exception(exc))[-4000:]
            err.print(f"[red]bench: {name} failed:[/] {exc!r}")
        self.details["section_seconds"][name] = round(time.perf_counter() - t0, 1)


async def measure(opts: Options) -> dict[str, Any]:
    sizes = QUICK if opts.quick else FULL
    if opts.crowds:
        sizes = replace(sizes, crowds=tuple(sorted({*sizes.crowds, *opts.crowds})))
    work = Path(tempfile.mkdtemp(prefix="pizzabot-bench-"))
    began = time.perf_counter()
    run = _Run(opts, sizes, work, {"section_seconds": {}, "errors": {}})
    if opts.profile:
        opts.output.parent.mkdir(parents=True, exist_ok=True)
    try:
        _bytecode_cache(work)
        model = ModelProcess(env=child_env({}), log=work / "model-server.log")
        async with model:
            skills = work / "skills"
            write_skills(skills, model.openai_base, tools_log=None)
            with run.section("import", "importing litellm"):
                # Before any child starts, so children read the bytecode this compiles.
                from pizzabot.agent.llm import import_litellm

                await asyncio.to_thread(import_litellm)
            pg = opts.postgres
            if pg is not None and run.wants("workers"):
                with run.section("workers", "worker processes on PostgreSQL"):
                    run.details["workers"] = await bench_workers(model, pg, work, sizes)
            await _in_process_parts(run, model, skills)
            if run.wants("start"):
                with run.section("start", "pizzabot serve start-up"):
                    run.details["start"] = await bench_start(
                        model, work, sizes, first_run=not opts.quick
                    )
            if run.wants("channels"):
                with run.section(
                    "channels", "decisions through Slack, the web page, a long-poll, email"
                ):
                    run.details["channels"] = await bench_channels(
                        model, work, sizes.channel_samples
                    )
            if run.wants("requests"):
                with run.section("requests", f"the request path, {sizes.crowds} waiting"):
                    run.details["requests"] = await bench_requests_path(
                        work, sizes.crowds, sizes.channel_samples, wait=sizes.crowd_wait_s
                    )
            if run.wants("fanout"):
                with run.section(
                    "fanout", f"fan-out of a decision, {sizes.fanout_waiting} waiting"
                ):
                    run.details["fanout"] = await bench_fanout(
                        work, sizes.fanout_waiting, sizes.channel_samples
                    )
    finally:
        if opts.keep:
            err.print(f"bench: work folder kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    return report(opts, sizes, run.details, time.perf_counter() - began)


async def _in_process_parts(run: _Run, model: ModelProcess, skills: Path) -> None:
    """The parts that run the engine in this process: steps, decisions, memory, and the
    many waiting (whose memory reading is a process of its own, as the memory part's)."""
    work, sizes, details, pg = run.work, run.sizes, run.details, run.opts.postgres
    if run.wants("steps"):
        with run.section("steps_sqlite", "steps on SQLite"):
            details["steps_sqlite"] = await bench_steps(
                model,
                f"sqlite+aiosqlite:///{work / 'steps.db'}",
                work / "steps-sqlite",
                skills,
                sizes,
                profile=run.prof("steps-sqlite"),
            )
    if pg is not None and run.wants("steps"):
        with run.section("steps_postgres", "steps on PostgreSQL"):
            async with scratch_postgres(pg) as url:
                details["steps_postgres"] = await bench_steps(
                    model, url, work / "steps-pg", skills, sizes, profile=run.prof("steps-postgres")
                )
    if run.wants("decisions"):
        with run.section("decisions", f"decisions with {sizes.waiting} runs waiting"):
            details["decisions"] = await bench_decisions(
                model,
                f"sqlite+aiosqlite:///{work / 'decisions.db'}",
                work / "decisions",
                skills,
                sizes,
            )
    if run.wants("memory"):
        with run.section("memory", f"memory for {sizes.memory_runs} waiting runs"):
            details["memory"] = await bench_memory(
                model, f"sqlite+aiosqlite:///{work / 'memory.db'}", work / "memory", skills, sizes
            )
    if run.wants("waiting"):
        with run.section("waiting", f"decisions and memory, {sizes.many_waiting} runs waiting"):
            details["waiting"] = await bench_many_waiting(
                model, f"sqlite+aiosqlite:///{work / 'waiting.db'}", work / "waiting", skills, sizes
            )


def figures_from(details: dict[str, Any]) -> dict[str, float | None]:
    def pick(section: str, key: str) -> float | None:
        value = details.get(section, {}).get(key)
        return None if value is None else float(value)

    workers = details.get("workers")
    overhead_sqlite = pick("steps_sqlite", "overhead_ms")
    overhead_postgres = pick("steps_postgres", "overhead_ms")
    return {
        "step_ms_sqlite": pick("steps_sqlite", "step_ms"),
        "overhead_ms_sqlite": pick("steps_sqlite", "overhead_ms"),
        "model_ms_sqlite": pick("steps_sqlite", "model_ms"),
        "tool_ms_sqlite": pick("steps_sqlite", "tool_ms"),
        "step_median_ms_sqlite": pick("steps_sqlite", "median_run_step_ms"),
        "runs_stalled_sqlite": pick("steps_sqlite", "runs_stalled"),
        "step_ms_postgres": pick("steps_postgres", "step_ms"),
        "overhead_ms_postgres": pick("steps_postgres", "overhead_ms"),
        "model_ms_postgres": pick("steps_postgres", "model_ms"),
        "tool_ms_postgres": pick("steps_postgres", "tool_ms"),
        "overhead_postgres_vs_sqlite": (
            overhead_postgres / overhead_sqlite
            if overhead_postgres is not None and overhead_sqlite
            else None
        ),
        "step_median_ms_postgres": pick("steps_postgres", "median_run_step_ms"),
        "runs_stalled_postgres": pick("steps_postgres", "runs_stalled"),
        "decision_to_tool_p50_ms": pick("decisions", "p50_ms"),
        "decision_to_tool_p99_ms": pick("decisions", "p99_ms"),
        "decision_to_started_p50_ms": pick("decisions", "started_p50_ms"),
        "decision_to_started_p99_ms": pick("decisions", "started_p99_ms"),
        "rss_waiting_delta_mib": pick("memory", "per_10000_mib"),
        "rss_per_waiting_run_kib": pick("memory", "per_run_kib"),
        "runs_per_s_1_worker": workers["one"]["runs_per_s"] if workers else None,
        "runs_per_s_2_workers": workers["two"]["runs_per_s"] if workers else None,
        "workers_speedup": workers["speedup"] if workers else None,
        "workers_speedup_headroom": workers.get("speedup_headroom") if workers else None,
        "cpu_ms_per_run_1_worker": workers["one"]["cpu_ms_per_run"] if workers else None,
        "cpu_ms_per_run_2_workers": workers["two"]["cpu_ms_per_run"] if workers else None,
        "cpu_per_run_2_vs_1_worker": (
            workers["two"]["cpu_ms_per_run"] / workers["one"]["cpu_ms_per_run"] if workers else None
        ),
        "claimed_twice": float(workers["executed_twice"]["runs"]) if workers else None,
        "healthz_s": pick("start", "median_s"),
        "ready_s": pick("start", "ready_median_s"),
        "first_run_s": pick("start", "first_run_s"),
        "slack_to_tool_p50_ms": pick("channels", "slack_p50_ms"),
        "slack_to_tool_p99_ms": pick("channels", "slack_p99_ms"),
        "web_to_tool_p50_ms": pick("channels", "web_p50_ms"),
        "web_to_tool_p99_ms": pick("channels", "web_p99_ms"),
        "long_poll_wake_p50_ms": pick("channels", "long_poll_p50_ms"),
        "long_poll_wake_p99_ms": pick("channels", "long_poll_p99_ms"),
        "email_to_tool_p50_ms": pick("channels", "email_p50_ms"),
        "email_to_tool_p99_ms": pick("channels", "email_p99_ms"),
        **crowd_figures(details.get("requests")),
        **fanout_figures(details.get("fanout")),
        **waiting_figures(details.get("waiting")),
    }


def report(opts: Options, sizes: Sizes, details: dict[str, Any], seconds: float) -> dict[str, Any]:
    figures = figures_from(details)
    return {
        "bench": "pizzabot",
        "mode": "quick" if opts.quick else "full",
        "at": datetime.now(UTC).isoformat(),
        "seconds": round(seconds, 1),
        "machine": machine(),
        "sizes": asdict(sizes),
        "figures": figures,
        "targets": {k: {"op": t.op, "value": t.value} for k, t in TARGETS.items()},
        "met": {k: t.met(figures.get(k)) for k, t in TARGETS.items()},
        "errors": details.pop("errors", {}),
        "details": details,
    }


def _fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "—"
    if unit == "":
        return f"{value:g}"
    if unit == "×":
        return f"{value:.2f}×"
    return f"{value:.{1 if abs(value) >= 100 else 2}f} {unit}"


def table(result: dict[str, Any]) -> Table:
    sizes = result["sizes"]
    t = Table(
        title=f"pizzabot bench ({result['mode']}: {sizes['waiting']} waiting for decisions, "
        f"{sizes['memory_runs']} for memory, {sizes['throughput_runs']} runs per worker phase)",
    )
    t.add_column("figure")
    t.add_column("value", justify="right")
    t.add_column("target")
    t.add_column("")
    for key, label, unit in ROWS:
        value = result["figures"].get(key)
        target = TARGETS.get(key)
        met = result["met"].get(key)
        mark = "" if met is None else ("[green]✓ met[/]" if met else "[red]✗ not met[/]")
        t.add_row(label, _fmt(value, unit), target.text if target else "", mark)
    return t


def require_psutil() -> None:
    """The bench reads processes' CPU time and memory through psutil, which only the `bench`
    extra installs: say so before anything starts, not halfway through."""
    try:
        import psutil  # noqa: F401
    except ImportError:
        raise CliError(
            "pizzabot bench needs psutil, which a plain install leaves out: "
            "pip install -r requirements-dev.lock",
            code=2,
        ) from None


def run(opts: Options) -> dict[str, Any]:
    """Measure, print the table, write the JSON; return what was written."""
    require_psutil()
    result = asyncio.run(measure(opts))
    show_and_save(result, table(result), opts.output, width=120)
    return result


def show_and_save(result: dict[str, Any], shown: Table, output: Path, *, width: int) -> None:
    """Print a bench's table and write its JSON to `output`."""
    out = Console()
    if not out.is_terminal:
        out = Console(width=width)  # a log or a pipe: no wrapping of the table's labels
    out.print(shown)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(result, indent=2, default=str) + "\n")
    err.print(f"bench: wrote {output} ({result['seconds']:.0f}s)")
