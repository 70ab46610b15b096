"""A real `pizzabot serve` process for end-to-end tests: start, SIGKILL, start again."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import httpx

from tests.waiting import eventually

#: Shared by the servers of every test (Python writes each file atomically).
BYTECODE = Path(tempfile.gettempdir()) / f"pizzabot-tests-pycache-{os.getuid()}"
TOKEN = "test-token-0123456789"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _children() -> dict[int, list[int]]:
    """Every process's children, from /proc (the parent pid is the 4th field of `stat`)."""
    out: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue  # gone meanwhile
        # The command name is in parentheses and may hold spaces or parentheses itself.
        ppid = int(stat[stat.rindex(b")") + 2 :].split()[1])
        out.setdefault(ppid, []).append(int(entry))
    return out


def _descendants(pid: int) -> set[int]:
    children, found, todo = _children(), set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def kill_tree(pid: int) -> None:
    """SIGKILL `pid` and all its descendants at once. Everything is stopped first (SIGSTOP)
    and the tree walked again until it stops growing, so nothing can start a process (or
    finish a tool call) between the walk and the kill."""
    stopped: set[int] = set()
    todo = {pid}
    while todo:
        for p in todo:
            with contextlib.suppress(ProcessLookupError):
                os.kill(p, signal.SIGSTOP)
        stopped |= todo
        todo = _descendants(pid) - stopped
    for p in stopped:
        with contextlib.suppress(ProcessLookupError):
            os.kill(p, signal.SIGKILL)


class ServerProcess:
    def __init__(
        self,
        *,
        data_dir: Path,
        skills_dir: Path,
        env: dict[str, str] | None = None,
        args: list[str] | None = None,
        port: int | None = None,
        cwd: Path | None = None,
    ) -> None:
        """``cwd``: where the server starts (default: the tests' own), as a user's may be
        anywhere."""
        self.data_dir = data_dir
        self.cwd = cwd
        self.skills_dir = skills_dir
        self.port = port or free_port()
        self.extra_env = env or {}
        self.args = args or []
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = data_dir / f"server-{self.port}.log"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
        env.update(
            {
                "PIZZABOT_DATA_DIR": str(self.data_dir),
                "PIZZABOT_SKILLS_DIR": str(self.skills_dir),
                "PIZZABOT_PORT": str(self.port),
                "PIZZABOT_API_TOKEN": TOKEN,
                "PIZZABOT_POLL_INTERVAL": "0.5",
                "PIZZABOT_LEASE_SECONDS": "5",
                "LITELLM_LOCAL_MODEL_COST_MAP": "True",
                # An installed Pizza Bot has its bytecode; without it every server a test
                # starts compiles litellm again (~13 s of CPU here, more under load).
                "PYTHONDONTWRITEBYTECODE": "",
                "PYTHONPYCACHEPREFIX": str(BYTECODE),
            }
        )
        env.update(self.extra_env)
        return env

    async def start(self, timeout: float = 90.0) -> None:
        # A guard against a server that never comes up, not a measure of how fast it does: two
        # busy cores have taken over 30 s to start one beside the other tests.
        self.data_dir.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "ab")  # noqa: SIM115 - the child keeps it
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "pizzabot.bot.main", "serve", *self.args],
            env=self.env(),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            cwd=self.cwd,
        )
        proc = self.proc
        async with httpx.AsyncClient() as c:

            async def ready() -> bool:
                if proc.poll() is not None:
                    raise RuntimeError(f"server exited: {self.log()}")
                return (await c.get(f"{self.url}/readyz", timeout=1)).status_code == 200

            await eventually(
                ready,
                what="the server to be ready",
                timeout=timeout,
                interval=0.1,
                retry_on=(httpx.HTTPError,),
                context=self.log,
            )

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-4000:]
        except OSError:
            return ""

    def kill(self) -> None:
        """SIGKILL the server and every process it started, as a crash (or a power cut) would.

        The MCP SDK starts stdio servers in sessions of their own, so the server's process
        group is not enough: a tool call in flight would finish after the "crash"."""
        if self.proc is not None and self.proc.poll() is None:
            kill_tree(self.proc.pid)
            self.proc.wait(10)
        self.proc = None

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        self.proc = None

    def client(self, token: str | None = TOKEN) -> httpx.AsyncClient:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.AsyncClient(base_url=self.url, headers=headers, timeout=30)

    async def wait_for(
        self, predicate: Any, *, timeout: float = 30.0, what: str = "condition"
    ) -> Any:
        """Poll the API until `predicate(client)` returns something truthy."""
        async with self.client() as c:
            return await eventually(
                lambda: predicate(c),
                what=what,
                timeout=timeout,
                interval=0.1,
                context=lambda: f"--- server log ---\n{self.log()}",
            )
