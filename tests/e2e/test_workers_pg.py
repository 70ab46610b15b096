"""Several `pizzabot worker` processes on one PostgreSQL database, behind one
`pizzabot serve --no-worker` that takes the API calls.

Workers share runs through leases and wake each other through LISTEN/NOTIFY: a decision or a
new run on an idle worker is taken at once (not at the next poll), every run finishes exactly
once with no tool call started twice, and the runs of a worker that is SIGKILLed mid-call are
finished by the others once its leases expire, without repeating the interrupted call.

The processes are shared by the tests of this module (starting one costs seconds of imports),
so the tests run in file order: the last one kills a worker.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import psutil
import pytest
import pytest_asyncio
import yaml

from pizzabot.agent.testing.model_server import ScriptedModelServer
from pizzabot.agent.testing.scripts import Message, Reply, ToolCall, count_role
from tests.conftest import fresh_pg_database
from tests.peers import mcp_tools
from tests.peers.server import ServerProcess
from tests.waiting import eventually

pytestmark = [pytest.mark.postgres, pytest.mark.asyncio(loop_scope="module")]

IDLE_POLL = 30.0  # seconds: far longer than any wake-up these tests allow
LEASE = 3.0
SLOW = 4.0  # seconds the interrupted tool call takes


def script(messages: list[Message], tools: list[dict[str, Any]]) -> Reply:
    """Inputs: "ask TAG" (send_email, needs a decision), "short TAG" (lookup, auto),
    "slow SECONDS" (slow, auto; the seconds tell the calls apart in the tools' log)."""
    first = next(m for m in messages if m.get("role") == "user")
    kind, tag = str(first["content"]).split()
    if count_role(messages, "tool"):
        return Reply(text=f"done {tag}")
    if kind == "ask":
        args = {"to": f"{tag}@example.com", "subject": tag, "body": "hello"}
        return Reply(tool_calls=[ToolCall(name="crm__send_email", arguments=args)])
    if kind == "slow":
        return Reply(tool_calls=[ToolCall(name="crm__slow", arguments={"seconds": float(tag)})])
    return Reply(tool_calls=[ToolCall(name="crm__lookup", arguments={"query": tag})])


@dataclass
class Worker:
    name: str
    proc: subprocess.Popen[bytes]
    log: Path

    def tail(self) -> str:
        return self.log.read_text(errors="replace")[-3000:]


@dataclass
class Cluster:
    root: Path
    server: ServerProcess
    tools_log: Path
    env: dict[str, str]
    workers: list[Worker] = field(default_factory=list)

    def start_worker(self, name: str, **env: str) -> Worker:
        log = self.root / f"{name}.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "pizzabot.bot.main", "worker"],
                env={**self.env, **env},
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its MCP servers share its process group
            )
        worker = Worker(name, proc, log)
        self.workers.append(worker)
        return worker

    def logs(self) -> str:
        parts = [f"--- {w.name} ---\n{w.tail()}" for w in self.workers]
        return "\n".join([f"--- server ---\n{self.server.log()}", *parts])

    async def start_run(self, skill: str, text: str) -> str:
        async with self.server.client() as c:
            r = await c.post("/api/runs", json={"skill": skill, "input": text})
            assert r.status_code == 201, r.text
            run_id: str = r.json()["id"]
            return run_id

    async def run(self, run_id: str) -> dict[str, Any]:
        async with self.server.client() as c:
            r = await c.get(f"/api/runs/{run_id}")
            assert r.status_code == 200, r.text
            data: dict[str, Any] = r.json()
            return data

    async def wait(self, run_ids: list[str], status: str, timeout: float) -> list[dict[str, Any]]:
        runs: list[dict[str, Any]] = []

        async def all_there() -> list[dict[str, Any]] | None:
            nonlocal runs
            for w in self.workers:
                if w.proc.poll() not in (None, -signal.SIGKILL):
                    raise AssertionError(f"{w.name} exited {w.proc.returncode}\n{self.logs()}")
            runs = [await self.run(i) for i in run_ids]
            return runs if all(r["status"] == status for r in runs) else None

        def states() -> str:
            return f"runs by state: {dict(Counter(r['status'] for r in runs))}\n{self.logs()}"

        return await eventually(
            all_there,
            what=f"{len(run_ids)} runs to be {status}",
            timeout=timeout,
            interval=0.2,
            context=states,
        )

    async def pending_item(self, run_id: str, timeout: float = 60) -> dict[str, Any]:
        async with self.server.client() as c:

            async def pending() -> dict[str, Any] | None:
                r = await c.get("/api/inbox", params={"box": "action"})
                for item in r.json()["items"]:
                    if item["run_id"] == run_id and item["status"] == "pending":
                        found: dict[str, Any] = item
                        return found
                return None

            return await eventually(
                pending,
                what=f"a pending action item for run {run_id}",
                timeout=timeout,
                interval=0.1,
                context=self.logs,
            )

    def tool_log(self) -> list[dict[str, Any]]:
        return mcp_tools.read_log(self.tools_log)


def _skill(model_base: str, tools_log: Path) -> dict[str, Any]:
    crm = {
        "command": "python",
        "args": [str(mcp_tools.SCRIPT), "stdio"],
        "env": {mcp_tools.LOG_ENV: str(tools_log)},
    }
    return {
        "name": "scale",
        "instructions": "You are a test agent.",
        "model": "openai/scripted",
        "model_options": {"api_base": model_base, "api_key": "x"},
        "mcp_servers": {"crm": crm},
        "tools": {"crm.send_email": "ask", "crm.lookup": "auto", "crm.slow": "auto"},
    }


def _bytecode_cache(folder: Path) -> dict[str, str]:
    """Let the processes share compiled bytecode where PYTHONDONTWRITEBYTECODE is set: a later
    worker then imports in a second or two instead of compiling litellm again. (An empty
    value turns a PYTHON* variable off.)"""
    if not os.environ.get("PYTHONDONTWRITEBYTECODE"):
        return {}
    return {"PYTHONDONTWRITEBYTECODE": "", "PYTHONPYCACHEPREFIX": str(folder)}


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def cluster(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Cluster]:
    root = tmp_path_factory.mktemp("workers-pg")
    tools_log = root / "tools.jsonl"
    skills = root / "skills"
    skills.mkdir()
    async with fresh_pg_database() as pg_url, ScriptedModelServer(script) as model:
        (skills / "scale.yaml").write_text(yaml.safe_dump(_skill(model.openai_base, tools_log)))
        server = ServerProcess(
            data_dir=root / "data",
            skills_dir=skills,
            args=["--no-worker"],
            env={
                "PIZZABOT_DATABASE_URL": pg_url,
                "PIZZABOT_POLL_INTERVAL": str(IDLE_POLL),
                "PIZZABOT_LEASE_SECONDS": str(LEASE),
                "PIZZABOT_WORKER_CONCURRENCY": "4",
                "PIZZABOT_LOG_LEVEL": "WARNING",
                **_bytecode_cache(root / "pycache"),
            },
        )
        cluster = Cluster(root=root, server=server, tools_log=tools_log, env=server.env())
        try:
            await server.start()
            yield cluster
        finally:
            for w in cluster.workers:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(w.proc.pid, signal.SIGKILL)
                w.proc.wait(10)
            server.stop()


def _at(event: dict[str, Any]) -> datetime:
    return datetime.fromisoformat(event["at"])


def _after(events: list[dict[str, Any]], kind: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The event of `kind` and the event that followed it."""
    i = next(n for n, e in enumerate(events) if e["kind"] == kind)
    return events[i], events[i + 1]


async def test_an_idle_worker_takes_a_new_run_and_a_decision_at_once(cluster: Cluster) -> None:
    cluster.start_worker("idle", PIZZABOT_POLL_INTERVAL=str(IDLE_POLL))
    # The first run also waits for the worker's start-up (imports, the MCP server).
    first = await cluster.start_run("scale", "short warm")
    await cluster.wait([first], "done", timeout=90)

    run_id = await cluster.start_run("scale", "ask idle")
    item = await cluster.pending_item(run_id)
    async with cluster.server.client() as c:
        r = await c.post(f"/api/items/{item['id']}/decision", json={"decision": "approve"})
        assert r.status_code == 200, r.text
    (run,) = await cluster.wait([run_id], "done", timeout=IDLE_POLL * 2)

    # Judged by the run's own event times, not by how long this test waited.
    events = run["events"]
    started, next_ = _after(events, "run_started")
    decided, resumed = _after(events, "decision")
    assert resumed["kind"] == "tool_started"
    for what, a, b in (("new run", started, next_), ("decision", decided, resumed)):
        waited = (_at(b) - _at(a)).total_seconds()
        assert waited < IDLE_POLL / 6, f"{what} waited {waited:.1f}s: a poll, not a wake-up"


async def test_many_runs_on_several_workers_each_finish_once(cluster: Cluster) -> None:
    for name in ("w1", "w2"):
        cluster.start_worker(name, PIZZABOT_POLL_INTERVAL="1")
    await eventually(
        lambda: all("worker ready" in w.tail() for w in cluster.workers),
        what="every worker to say it claims runs",
        timeout=60,
        context=cluster.logs,
    )
    # The 30 runs are queued together and each call takes a second: one worker (4 runs at a
    # time) would need 8 seconds for them all, while the others are woken by the same NOTIFY
    # and poll every second. (Queued one by one on a loaded machine, each run could be done
    # before the next one came, and one worker could take them all.)
    seconds = [1.0 + k / 1000 for k in range(30)]
    ids = list(await asyncio.gather(*(cluster.start_run("scale", f"slow {s}") for s in seconds)))
    runs = await cluster.wait(ids, "done", timeout=120)

    for run in runs:
        kinds = Counter(e["kind"] for e in run["events"])
        assert kinds["run_finished"] == 1, run["id"]
        started = Counter(
            e["data"]["call_id"] for e in run["events"] if e["kind"] == "tool_started"
        )
        assert set(started.values()) == {1}, run["id"]
    calls = [
        e
        for e in cluster.tool_log()
        if e["tool"] == "slow" and e["event"] == "started" and e["args"]["seconds"] in seconds
    ]
    assert Counter(e["args"]["seconds"] for e in calls) == dict.fromkeys(seconds, 1)
    # Each worker runs its own MCP server: more than one of them did the work.
    assert len({e["pid"] for e in calls}) >= 2


async def test_a_killed_workers_runs_are_finished_by_the_others(cluster: Cluster) -> None:
    for name in ("w1", "w2")[len(cluster.workers) :]:  # when run on its own
        cluster.start_worker(name, PIZZABOT_POLL_INTERVAL="1")
    # No one worker (4 runs at a time) can hold all six calls: each must be ready to claim,
    # or the first would finish its four and take the rest one after the other.
    await eventually(
        lambda: all("worker ready" in w.tail() for w in cluster.workers),
        what="every worker to say it claims runs",
        timeout=60,
        context=cluster.logs,
    )
    seconds = [SLOW + k / 100 for k in range(6)]
    ids = [await cluster.start_run("scale", f"slow {s}") for s in seconds]

    # Wait until the slow calls run, then kill a worker that holds one, with its MCP server.
    def running() -> dict[int, list[float]] | None:
        log = [e for e in cluster.tool_log() if e["tool"] == "slow"]
        done = {e["args"]["seconds"] for e in log if e["event"] == "finished"}
        holders: dict[int, list[float]] = {}
        for e in log:
            s = e["args"]["seconds"]
            if e["event"] == "started" and s in seconds and s not in done:
                holders.setdefault(e["pid"], []).append(s)
        return holders if sum(map(len, holders.values())) >= len(seconds) else None

    holders = await eventually(
        running,
        what=f"the {len(seconds)} slow calls to be running at once",
        timeout=60,
        interval=0.1,
        context=cluster.logs,
    )
    mcp_pid, interrupted = max(holders.items(), key=lambda kv: len(kv[1]))
    victim = next(w for w in cluster.workers if psutil.Process(mcp_pid).ppid() == w.proc.pid)
    # As a lost host would: the worker and its MCP server (which has a session of its own).
    os.killpg(victim.proc.pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        os.kill(mcp_pid, signal.SIGKILL)
    victim.proc.wait(10)

    runs = await cluster.wait(ids, "done", timeout=60)

    by_seconds = {float(r["input"].split()[1]): r for r in runs}
    for s in interrupted:
        results = [e for e in by_seconds[s]["events"] if e["kind"] == "tool_result"]
        # Another worker took the run over; the call's outcome is unknown, so it is not redone.
        assert [e["data"].get("interrupted") for e in results] == [True], by_seconds[s]
    starts = Counter(
        e["args"]["seconds"]
        for e in cluster.tool_log()
        if e["tool"] == "slow" and e["event"] == "started"
    )
    assert {s: starts[s] for s in seconds} == dict.fromkeys(seconds, 1)
    for run in runs:
        started = Counter(
            e["data"]["call_id"] for e in run["events"] if e["kind"] == "tool_started"
        )
        assert set(started.values()) == {1}, run["id"]
