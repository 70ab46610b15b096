"""`pizzabot bench --compare langgraph`: the rounds, the ratios, the table and the JSON.

Each part runs Pizza Bot, then LangGraph, then Pizza Bot again, and so on for the rounds
(A B A B A B), so the two meet the same moments of the machine; a figure's ratio is the median
of the per-round ratios (Pizza Bot ÷ LangGraph), and the table shows every round's values.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from bench.compare import lgvenv, pizza_side
from bench.engine import child_env, write_skills
from bench.model import ModelProcess
from bench.procs import machine

SIDE = Path(__file__).with_name("langgraph_side.py")
DEFAULT_VENV = Path("bench-output/langgraph-venv")
PARTS = ("steps", "decisions", "memory", "start", "inflight", "alone")
#: Parts with figures of Pizza Bot's alone (a target of their own, no LangGraph side).
PIZZA_ONLY = ("alone",)

err = Console(stderr=True)


@dataclass(frozen=True)
class Sizes:
    steps: int  # model calls timed per round
    cpu_runs: int  # runs of one tool call whose CPU time is read
    waiting: int  # runs left waiting while decisions are timed
    samples: int  # decisions timed
    memory_runs: int  # runs made to wait for the memory figure
    inflight: int  # runs in flight at once with the slow model
    delay_ms: int  # the slow model's time to answer
    rounds: int
    crowd: int  # requests waiting on long-polls while Pizza Bot's decision → long-poll is timed
    crowd_wait_s: float  # seconds each of them waits on one long-poll


FULL = Sizes(200, 50, 1000, 200, 10_000, 500, 1000, 3, 100, 60)
QUICK = Sizes(10, 3, 20, 10, 100, 20, 1000, 1, 10, 3)


@dataclass(frozen=True)
class Row:
    key: str
    label: str
    part: str
    field: str
    unit: str
    #: the ratio target: ("<=", 0.8) for Pizza Bot ÷ LangGraph ≤ 0.8; None: context only
    target: tuple[str, float] | None = None
    #: a target for Pizza Bot's own value (the median of its rounds), where the row has one
    absolute: tuple[str, float] | None = None


ROWS: tuple[Row, ...] = (
    Row("step_ms", "step (model + tool), SQLite", "steps", "step_ms", "ms", ("<=", 0.8)),
    Row("overhead_ms", "  the engine's own share of a step", "steps", "overhead_ms", "ms", ("<=", 0.4)),
    Row("model_ms", "  model call (client + HTTP)", "steps", "model_ms", "ms"),
    Row("tool_ms", "  tool call (MCP stdio)", "steps", "tool_ms", "ms"),
    Row("cpu_ms_per_run", "CPU per run (engine + MCP server + model server)", "steps", "cpu_ms_per_run", "ms", ("<=", 1.0)),
    Row("decision_p50_ms", "decision → tool body p50, {waiting} waiting", "decisions", "p50_ms", "ms", ("<=", 1.0)),
    Row("decision_p99_ms", "decision → tool body p99", "decisions", "p99_ms", "ms", ("<=", 1.0)),
    Row("rss_waiting_mib", "RSS growth for 10,000 waiting ({memory_runs} made)", "memory", "per_10000_mib", "MiB", ("<=", 1.0)),
    Row("rss_idle_mib", "RSS of the process before any run", "start", "rss_before_run_mib", "MiB", ("<=", 1.0)),
    Row("ready_s", "pizzabot serve start → /readyz (Pizza Bot alone)", "start", "ready_s", "s", absolute=("<=", 1.0)),
    Row("first_run_s", "start → first run done", "start", "first_run_s", "s", ("<=", 1.0)),
    Row("model_import_s", "  the model library's import alone", "start", "model_import_s", "s"),
    Row("inflight_runs_per_s", "{inflight} in flight, {delay_s} s model: runs/s", "inflight", "runs_per_s", "/s", (">=", 1.0)),
    Row("inflight_wall_p50_s", "  run wall p50", "inflight", "wall_p50_s", "s"),
    Row("inflight_wall_p99_s", "  run wall p99", "inflight", "wall_p99_s", "s"),
    Row("inflight_overhead_p99_ms", "  engine overhead p99", "inflight", "overhead_p99_ms", "ms"),
    Row("inflight_peak_rss_mib", "  peak RSS", "inflight", "peak_rss_mib", "MiB", ("<=", 1.0)),
    Row("long_poll_p99_ms", "decision → request long-poll p99, {crowd} waiting (Pizza Bot alone)", "alone", "wake_p99_ms", "ms", absolute=("<=", 50.0)),
    Row("pg_vs_sqlite", "engine overhead, PostgreSQL ÷ SQLite (Pizza Bot alone)", "alone", "pg_vs_sqlite", "×", absolute=("<=", 1.5)),
)  # fmt: skip


@dataclass
class Options:
    quick: bool = False
    output: Path = Path("bench-output/compare-langgraph.json")
    venv: Path = DEFAULT_VENV
    parts: tuple[str, ...] = PARTS
    keep: bool = False
    postgres: str | None = None  # a PostgreSQL server for scratch databases; None: no PG figure


# -- the LangGraph side, one process per part ---------------------------------------------


@dataclass
class _Context:
    opts: Options
    sizes: Sizes
    work: Path
    python: Path
    model: ModelProcess
    skills: Path


def _lg_config(ctx: _Context, part: str, tag: str) -> dict[str, Any]:
    s = ctx.sizes
    return {
        "part": part,
        "model_base": ctx.model.openai_base,
        # The same MCP server program Pizza Bot's skills start, on this interpreter.
        "tools_command": [sys.executable, "-m", "bench.tools"],
        "tools_cwd": os.getcwd(),
        "db": str(ctx.work / f"langgraph-{part}-{tag}.db"),
        "steps": s.steps,
        "cpu_runs": s.cpu_runs,
        "waiting": s.waiting,
        "samples": s.samples,
        "memory_runs": s.memory_runs,
        "batch": min(500, s.memory_runs // 10),
        "inflight": s.inflight,
        "delay_ms": s.delay_ms,
    }


async def langgraph(ctx: _Context, part: str, tag: str) -> dict[str, Any]:
    """One part in a fresh process of the LangGraph virtualenv; its figures."""
    log = os.open(ctx.work / f"langgraph-{part}-{tag}.log", os.O_WRONLY | os.O_CREAT, 0o644)
    began = time.perf_counter()
    try:
        proc = await asyncio.create_subprocess_exec(
            str(ctx.python),
            str(SIDE),
            json.dumps(_lg_config(ctx, part, tag)),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=log,
            env=child_env({}),
        )
    finally:
        os.close(log)  # the child has its own copy
    try:
        async with asyncio.timeout(1800):
            result = await _lg_talk(ctx, proc, began)
    finally:
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()
        await ctx.model.forget()
    return result


async def _lg_talk(ctx: _Context, proc: asyncio.subprocess.Process, began: float) -> dict[str, Any]:
    assert proc.stdout is not None and proc.stdin is not None
    result: dict[str, Any] | None = None
    cpu: list[float] = []
    first: float | None = None
    while line := await proc.stdout.readline():
        if not line.startswith(b"{"):
            continue  # a library's chatter on stdout
        data = json.loads(line)
        phase = data.get("phase")
        if phase in ("cpu", "cpu-done"):
            # The LangGraph process with its MCP server, and the model server.
            cpu.append(pizza_side.cpu_seconds([proc.pid]) + pizza_side.cpu_seconds([ctx.model.pid]))
            proc.stdin.write(b"\n")
            await proc.stdin.drain()
        elif phase == "first-run-done":
            first = time.perf_counter() - began
        else:
            result = data
    code = await proc.wait()
    if code != 0 or result is None:
        tail = ""
        with contextlib.suppress(OSError):
            logs = sorted(ctx.work.glob("langgraph-*.log"), key=lambda p: p.stat().st_mtime)
            tail = logs[-1].read_text(errors="replace")[-3000:]
        raise RuntimeError(f"the LangGraph side exited {code}:\n{tail}")
    if len(cpu) == 2:
        result["cpu_ms_per_run"] = (cpu[1] - cpu[0]) * 1000 / ctx.sizes.cpu_runs
    if first is not None:
        result["first_run_s"] = first
    return result


async def pizzabot(ctx: _Context, part: str, tag: str) -> dict[str, Any]:
    s, work = ctx.sizes, ctx.work / f"pizzabot-{part}-{tag}"
    work.mkdir(parents=True)
    if part == "steps":
        return await pizza_side.steps(ctx.model, work, ctx.skills, s.steps, s.cpu_runs)
    if part == "decisions":
        return await pizza_side.decisions(ctx.model, work, ctx.skills, s.waiting, s.samples)
    if part == "memory":
        return await pizza_side.memory(ctx.model, work, ctx.skills, s.memory_runs)
    if part == "start":
        return await pizza_side.start(work, ctx.skills)
    if part == "inflight":
        return await pizza_side.inflight(ctx.model, work, ctx.skills, s.inflight, s.delay_ms)
    if part == "alone":
        return await pizza_side.alone(
            ctx.model,
            work,
            ctx.skills,
            steps=s.steps,
            crowd=s.crowd,
            crowd_wait_s=s.crowd_wait_s,
            samples=s.samples // 2,
            postgres=ctx.opts.postgres,
        )
    raise ValueError(part)


# -- the rounds ---------------------------------------------------------------------------


async def measure(opts: Options) -> dict[str, Any]:
    from bench.runner import _bytecode_cache

    sizes = QUICK if opts.quick else FULL
    work = Path(tempfile.mkdtemp(prefix="pizzabot-compare-"))
    began = time.perf_counter()
    rounds: dict[str, list[dict[str, Any]]] = {part: [] for part in opts.parts}
    errors: dict[str, str] = {}
    try:
        _bytecode_cache(work)
        err.print(f"[dim]bench: the LangGraph virtualenv ({opts.venv}) …[/]")
        opts.venv.parent.mkdir(parents=True, exist_ok=True)
        python = await asyncio.to_thread(
            lgvenv.ensure, opts.venv.resolve(), log=opts.venv.parent / "langgraph-venv.log"
        )
        model = ModelProcess(env=child_env({}), log=work / "model-server.log")
        async with model:
            skills = work / "skills"
            write_skills(skills, model.openai_base, tools_log=None)
            ctx = _Context(opts, sizes, work, python, model, skills)
            if "start" in opts.parts:
                # Untimed: compiled bytecode and the file cache, as a second start finds them.
                err.print("[dim]bench: warming both sides' start-up …[/]")
                await pizzabot(ctx, "start", "warm")
                await langgraph(ctx, "start", "warm")
            for part in opts.parts:
                await _rounds(ctx, part, rounds[part], errors)
    finally:
        if opts.keep:
            err.print(f"bench: work folder kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    return report(opts, sizes, rounds, errors, time.perf_counter() - began)


async def _rounds(
    ctx: _Context, part: str, into: list[dict[str, Any]], errors: dict[str, str]
) -> None:
    """A part's rounds, A B A B A B; a part that fails is reported and the others still run."""
    for r in range(ctx.sizes.rounds):
        pair: dict[str, Any] = {}
        sides: tuple[tuple[str, Any], ...] = (("pizzabot", pizzabot), ("langgraph", langgraph))
        if part in PIZZA_ONLY:
            sides, pair["langgraph"] = sides[:1], {}
        for name, side in sides:
            err.print(f"[dim]bench: {part}, round {r + 1}, {name} …[/]")
            try:
                pair[name] = await side(ctx, part, str(r))
            except Exception as exc:
                import traceback

                errors[f"{part}/{name}"] = "".join(traceback.format_exception(exc))[-4000:]
                err.print(f"[red]bench: {part} ({name}) failed:[/] {exc!r}")
                return
        into.append(pair)


def _values(rounds: list[dict[str, Any]], side: str, field: str) -> list[float]:
    return [float(r[side][field]) for r in rounds if r[side].get(field) is not None]


def _met(target: tuple[str, float] | None, value: float | None) -> bool | None:
    if target is None or value is None:
        return None
    op, bound = target
    return value <= bound if op == "<=" else value >= bound


def figures(rounds: dict[str, list[dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """Per row: each round's values for both, the per-round ratios and their median, and
    whether the row's target is met (the ratio's, or Pizza Bot's own median value's)."""
    out: dict[str, dict[str, Any]] = {}
    for row in ROWS:
        done = rounds.get(row.part, [])
        a = _values(done, "pizzabot", row.field)
        b = _values(done, "langgraph", row.field)
        ratios = [x / y for x, y in zip(a, b, strict=False) if y]
        ratio = statistics.median(ratios) if ratios else None
        met = _met(row.target, ratio)
        if row.absolute is not None:
            met = _met(row.absolute, statistics.median(a) if a else None)
        out[row.key] = {"pizzabot": a, "langgraph": b, "ratios": ratios, "ratio": ratio, "met": met}
    return out


def report(
    opts: Options,
    sizes: Sizes,
    rounds: dict[str, list[dict[str, Any]]],
    errors: dict[str, str],
    seconds: float,
) -> dict[str, Any]:
    return {
        "bench": "pizzabot --compare langgraph",
        "mode": "quick" if opts.quick else "full",
        "at": datetime.now(UTC).isoformat(),
        "seconds": round(seconds, 1),
        "machine": machine(),
        "sizes": asdict(sizes),
        "langgraph_pins": list(lgvenv.PINS),
        "figures": figures(rounds),
        "errors": errors,
        "rounds": rounds,
    }


def _fmt(value: float, unit: str) -> str:
    digits = 0 if abs(value) >= 100 else 1 if abs(value) >= 10 else 2
    return f"{value:.{digits}f}"


def _show(values: list[float], unit: str) -> str:
    if not values:
        return "—"
    return " / ".join(_fmt(v, unit) for v in values) + (f" {unit}" if unit else "")


def _target_text(row: Row) -> str:
    if row.absolute is not None:
        op, value = row.absolute
        return f"{'≤' if op == '<=' else '≥'} {value:g} {row.unit}".rstrip()
    if row.target is None:
        return ""
    op, value = row.target
    return f"{'≤' if op == '<=' else '≥'} {value:g}"


def table(result: dict[str, Any]) -> Table:
    sizes = result["sizes"]
    names: dict[str, Any] = {**sizes, "delay_s": f"{sizes['delay_ms'] / 1000:g}"}
    t = Table(
        title=f"pizzabot bench --compare langgraph ({result['mode']}, {sizes['rounds']} "
        "rounds A B A B …; each cell: the rounds in order)"
    )
    for column, justify in (
        ("figure", "left"),
        ("Pizza Bot", "right"),
        ("LangGraph", "right"),
        ("ratio (median)", "right"),
        ("target", "left"),
        ("", "left"),
    ):
        t.add_column(column, justify=justify)  # type: ignore[arg-type]
    for row in ROWS:
        fig = result["figures"][row.key]
        ratio = fig["ratio"]
        met = fig["met"]
        mark = "" if met is None else ("[green]✓ met[/]" if met else "[red]✗ not met[/]")
        t.add_row(
            row.label.format(**names),
            _show(fig["pizzabot"], row.unit),
            _show(fig["langgraph"], row.unit),
            "—" if ratio is None else f"{ratio:.2f}",
            _target_text(row),
            mark,
        )
    return t


def run(opts: Options) -> dict[str, Any]:
    """Measure, print the table, write the JSON; return what was written."""
    from bench.runner import require_psutil, show_and_save

    require_psutil()
    result = asyncio.run(measure(opts))
    show_and_save(result, table(result), opts.output, width=160)
    return result
