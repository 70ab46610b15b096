"""`pizzabot bench --compare awaithumans`: Pizza Bot's request path beside awaithumans's.

awaithumans is a server an agent asks for a person's decision through its SDK (`await_human()`),
as an agent asks Pizza Bot through `pizzabot.client`. Its server and SDK come from the package
registry into a virtualenv the bench makes in a cache folder (`AH_PINS`; never a dependency of
Pizza Bot). Each round starts a fresh server of each side on SQLite, Pizza Bot first, then
awaithumans (A B A B A B), and runs the same agents against it (`hitl_agent`, on each side's
Python): `crowd` agents waiting on a decision, then `samples` more timed one at a time: request
→ card made, decision → agent resumed. The bench reads each server's start-up time (start →
answering as ready: Pizza Bot's `/readyz`, awaithumans's `/api/health`) and its resident memory
before and after the crowd parks. A figure's ratio is the median of the per-round ratios
(Pizza Bot ÷ awaithumans); every target is ≤ 1.0.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console
from rich.table import Table

from bench.compare import lgvenv
from bench.engine import child_env, free_port
from bench.procs import Child, _wait_answer, machine
from bench.requests_path import SKILL, _rss

AGENT = Path(__file__).with_name("hitl_agent.py")
#: awaithumans's server and SDK as measured, and the libraries its server runs on.
AH_PINS: tuple[str, ...] = (
    "awaithumans[server]==0.1.12",
    "fastapi==0.165.0",
    "starlette==1.10.0",
    "uvicorn[standard]==0.55.0",
    "sqlalchemy==2.1.9",
    "sqlmodel==0.0.50",
    "aiosqlite==0.22.1",
    "httpx==0.29.0",
    "pydantic==2.14.4",
)
PARTS = ("requests",)
KIB = 1024

err = Console(stderr=True)


def default_venv() -> Path:
    """A cache folder, kept between runs: `$XDG_CACHE_HOME/pizzabot-bench/awaithumans-venv`."""
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "pizzabot-bench" / "awaithumans-venv"


@dataclass(frozen=True)
class Sizes:
    crowd: int  # agents waiting on a decision while the samples are timed
    samples: int  # requests timed one at a time
    rounds: int


FULL = Sizes(1000, 100, 3)
QUICK = Sizes(10, 5, 1)


@dataclass(frozen=True)
class Row:
    key: str
    label: str
    unit: str
    target: bool = True  # Pizza Bot ÷ awaithumans ≤ 1.0


ROWS: tuple[Row, ...] = (
    Row("start_s", "server start → ready to answer", "s"),
    Row("rss_ready_mib", "  server RSS once warm", "MiB", target=False),
    Row("create_p50_ms", "request sent → answered (card made), p50, {crowd} waiting", "ms"),
    Row("create_p99_ms", "  request sent → answered, p99", "ms"),
    Row("resume_p50_ms", "decision → agent resumed, p50", "ms"),
    Row("resume_p99_ms", "  decision → agent resumed, p99", "ms"),
    Row("decision_post_p50_ms", "  the decision POST answered, p50", "ms", target=False),
    Row("rss_per_waiting_kib", "server RSS per waiting request", "KiB"),
    Row("crowd_failed", "  waiting agents that failed", "", target=False),
    Row("samples_failed", "  timed requests that failed (not timed)", "", target=False),
)


@dataclass
class Options:
    quick: bool = False
    output: Path = Path("bench-output/compare-awaithumans.json")
    venv: Path = field(default_factory=default_venv)
    parts: tuple[str, ...] = PARTS
    keep: bool = False


@dataclass
class _Command(Child):
    """A server started from a command of its own (awaithumans's console script)."""

    command: list[str] = field(default_factory=list)

    def start(self) -> None:
        with open(self.log, "ab") as out:
            self.started = time.perf_counter()
            self.proc = subprocess.Popen(
                self.command,
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )


def _pizzabot_server(work: Path, token: str, crowd: int) -> tuple[Child, str, str]:
    """`pizzabot serve` as `bench.requests_path` runs it: (process, base URL, ready URL)."""
    skills = work / "skills"
    skills.mkdir(parents=True, exist_ok=True)
    (skills / "bench-requests.yaml").write_text(yaml.safe_dump(SKILL, sort_keys=False))
    port = free_port()
    env = {
        "PIZZABOT_DATA_DIR": str(work / "data"),
        "PIZZABOT_SKILLS_DIR": str(skills),
        "PIZZABOT_PORT": str(port),
        "PIZZABOT_API_TOKEN": token,
        "PIZZABOT_MAX_CONNECTIONS": str(crowd + 100),
    }
    child = Child("pizzabot", ["serve", "--no-worker"], child_env(env), work / "server.log")
    base = f"http://127.0.0.1:{port}"
    return child, base, f"{base}/readyz"


def _awaithumans_server(work: Path, token: str, python: Path) -> tuple[Child, str, str]:
    """`awaithumans serve` on a SQLite file, as its production command wants it set up."""
    port = free_port()
    env = child_env(
        {
            "AWAITHUMANS_DB_PATH": str(work / "awaithumans.db"),
            "AWAITHUMANS_PAYLOAD_KEY": base64.urlsafe_b64encode(os.urandom(32)).decode(),
            "AWAITHUMANS_ADMIN_API_TOKEN": token,
        }
    )
    script = python.with_name("awaithumans")
    command = [str(script), "serve", "--host", "127.0.0.1", "--port", str(port)]
    child = _Command("awaithumans", [], env, work / "server.log", command=command)
    base = f"http://127.0.0.1:{port}"
    return child, base, f"{base}/api/health"


@contextlib.asynccontextmanager
async def _started(child: Child, ready_url: str) -> AsyncIterator[float]:
    child.start()
    try:
        yield await _wait_answer(child, ready_url, "ready")
    finally:
        child.stop(signal.SIGTERM)


async def one_side(side: str, work: Path, sizes: Sizes, ah_python: Path | None) -> dict[str, Any]:
    """One fresh server of `side` and its agents: that side's figures for one round."""
    await asyncio.to_thread(work.mkdir, parents=True)
    token = "bench-token-" + uuid.uuid4().hex
    if side == "pizzabot":
        child, base, ready_url = _pizzabot_server(work, token, sizes.crowd)
        python = Path(sys.executable)
    else:
        assert ah_python is not None
        child, base, ready_url = _awaithumans_server(work, token, ah_python)
        python = ah_python
    config: dict[str, Any] = {"side": side, "base": base, "token": token}
    config |= {"crowd": sizes.crowd, "samples": sizes.samples}
    async with _started(child, ready_url) as start_s:
        rss: dict[str, int] = {}
        log = os.open(work / "agent.log", os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            agent = await asyncio.create_subprocess_exec(
                str(python),
                str(AGENT),
                json.dumps(config),
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=log,
                env=child_env({}),
            )
        finally:
            os.close(log)  # the child has its own copy
        try:
            async with asyncio.timeout(1800):
                result = await _talk(agent, child, rss, work)
        finally:
            if agent.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    agent.kill()
                await agent.wait()
    result["start_s"] = start_s
    result["rss_ready_mib"] = rss["warm"] / KIB / KIB
    result["rss_per_waiting_kib"] = (rss["parked"] - rss["warm"]) / KIB / sizes.crowd
    return result


async def _talk(
    agent: asyncio.subprocess.Process, server: Child, rss: dict[str, int], work: Path
) -> dict[str, Any]:
    assert agent.stdout is not None and agent.stdin is not None
    result: dict[str, Any] | None = None
    while line := await agent.stdout.readline():
        if not line.startswith(b"{"):
            continue
        data = json.loads(line)
        if "phase" in data:
            server.check()
            rss[data["phase"]] = _rss(server.pid)
            agent.stdin.write(b"\n")
            await agent.stdin.drain()
        else:
            result = data
    code = await agent.wait()
    if code != 0 or result is None:
        tail = (work / "agent.log").read_text(errors="replace")[-3000:]
        raise RuntimeError(f"the agents exited {code}:\n{tail}\nserver:\n{server.tail()}")
    return result


async def measure(opts: Options) -> dict[str, Any]:
    from bench.runner import _bytecode_cache

    sizes = QUICK if opts.quick else FULL
    work = Path(tempfile.mkdtemp(prefix="pizzabot-compare-ah-"))
    began = time.perf_counter()
    rounds: list[dict[str, Any]] = []
    errors: dict[str, str] = {}
    try:
        _bytecode_cache(work)
        err.print(f"[dim]bench: the awaithumans virtualenv ({opts.venv}) …[/]")
        opts.venv.parent.mkdir(parents=True, exist_ok=True)
        python = await asyncio.to_thread(
            lgvenv.ensure,
            opts.venv.resolve(),
            log=opts.venv.parent / "awaithumans-venv.log",
            pins=AH_PINS,
        )
        if "requests" in opts.parts:
            for r in range(sizes.rounds):
                pair: dict[str, Any] = {}
                for side in ("pizzabot", "awaithumans"):
                    err.print(f"[dim]bench: requests, round {r + 1}, {side} …[/]")
                    try:
                        pair[side] = await one_side(side, work / f"{side}-{r}", sizes, python)
                    except Exception as exc:
                        import traceback

                        errors[f"requests/{side}"] = "".join(traceback.format_exception(exc))[
                            -4000:
                        ]
                        err.print(f"[red]bench: requests ({side}) failed:[/] {exc!r}")
                        break
                else:
                    rounds.append(pair)
                    continue
                break
    finally:
        if opts.keep:
            err.print(f"bench: work folder kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    return report(opts, sizes, rounds, errors, time.perf_counter() - began)


def figures(rounds: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per row: each round's values for both, the per-round ratios, their median and whether
    it meets ≤ 1.0."""
    out: dict[str, dict[str, Any]] = {}
    for row in ROWS:
        a = [float(r["pizzabot"][row.key]) for r in rounds]
        b = [float(r["awaithumans"][row.key]) for r in rounds]
        ratios = [x / y for x, y in zip(a, b, strict=True) if y > 0]
        ratio = statistics.median(ratios) if ratios else None
        met = None if not row.target or ratio is None else ratio <= 1.0
        out[row.key] = {
            "pizzabot": a,
            "awaithumans": b,
            "ratios": ratios,
            "ratio": ratio,
            "met": met,
        }
    return out


def report(
    opts: Options,
    sizes: Sizes,
    rounds: list[dict[str, Any]],
    errors: dict[str, str],
    seconds: float,
) -> dict[str, Any]:
    return {
        "bench": "pizzabot --compare awaithumans",
        "mode": "quick" if opts.quick else "full",
        "at": datetime.now(UTC).isoformat(),
        "seconds": round(seconds, 1),
        "machine": machine(),
        "sizes": asdict(sizes),
        "awaithumans_pins": list(AH_PINS),
        "figures": figures(rounds),
        "errors": errors,
        "rounds": rounds,
    }


def table(result: dict[str, Any]) -> Table:
    from bench.compare.run import _show

    sizes = result["sizes"]
    t = Table(
        title=f"pizzabot bench --compare awaithumans ({result['mode']}, {sizes['rounds']} "
        "rounds A B A B …; each cell: the rounds in order)"
    )
    for column in ("figure", "Pizza Bot", "awaithumans", "ratio (median)", "target", ""):
        t.add_column(column, justify="left" if column in ("figure", "target", "") else "right")
    for row in ROWS:
        fig = result["figures"][row.key]
        met = fig["met"]
        t.add_row(
            row.label.format(**sizes),
            _show(fig["pizzabot"], row.unit),
            _show(fig["awaithumans"], row.unit),
            "—" if fig["ratio"] is None else f"{fig['ratio']:.2f}",
            "≤ 1.0" if row.target else "",
            "" if met is None else ("[green]✓ met[/]" if met else "[red]✗ not met[/]"),
        )
    return t


def run(opts: Options) -> dict[str, Any]:
    """Measure, print the table, write the JSON; return what was written."""
    from bench.runner import require_psutil, show_and_save

    require_psutil()
    result = asyncio.run(measure(opts))
    show_and_save(result, table(result), opts.output, width=160)
    return result
