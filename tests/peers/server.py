"""A real `pizzabot serve` process for end-to-end tests: start, SIGKILL, start again."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

#: Shared by the servers of every test (Python writes each file atomically).
BYTECODE = Path(tempfile.gettempdir()) / f"pizzabot-tests-pycache-{os.getuid()}"
TOKEN = "test-token-0123456789"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ServerProcess:
    def __init__(
        self,
        *,
        data_dir: Path,
        skills_dir: Path,
        env: dict[str, str] | None = None,
        args: list[str] | None = None,
        port: int | None = None,
    ) -> None:
        self.data_dir = data_dir
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

    async def start(self, timeout: float = 30.0) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "ab")  # noqa: SIM115 - the child keeps it
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "bot.cli", "serve", *self.args],
            env=self.env(),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + timeout
        async with httpx.AsyncClient() as c:
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"server exited: {self.log()}")
                try:
                    if (await c.get(f"{self.url}/readyz", timeout=1)).status_code == 200:
                        return
                except httpx.HTTPError:
                    pass
                await asyncio.sleep(0.1)
        raise RuntimeError(f"server did not become ready: {self.log()}")

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-4000:]
        except OSError:
            return ""

    def kill(self) -> None:
        """SIGKILL the whole process group: the server and its MCP servers, as a crash would."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
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
        deadline = time.monotonic() + timeout
        async with self.client() as c:
            while time.monotonic() < deadline:
                value = await predicate(c)
                if value:
                    return value
                await asyncio.sleep(0.1)
        raise AssertionError(f"timed out waiting for {what}\n--- server log ---\n{self.log()}")
