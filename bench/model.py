"""The scripted model provider of `pizzabot bench`, in a process of its own.

A real provider is never inside the engine's process. Served from a thread of the bench's own
process, the scripted server's HTTP work (parsing, answering, closing the connection) took the
GIL from the engine being timed and showed up as engine overhead; the LangGraph comparison
the bench is read against had its server apart too. So the bench starts this module as a child
(`ModelProcess`) and reaches it over loopback only: through the engine's model client for the
model calls, and through a few `/bench/...` routes for what the bench asks of the server itself
(how often each model step was asked, how many TCP connections the calls used, forgetting what
it kept).

Run: `python -m bench.model` prints the server's base URL as its first line on stdout and
serves until its stdin closes (the bench closing it, or the bench dying).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import subprocess
import sys
import traceback
from collections import Counter
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from pizzabot.agent.testing.model_server import ScriptedModelServer
from pizzabot.agent.testing.scripts import Message, Reply, ToolCall, count_role

if TYPE_CHECKING:
    import httpx

TOOL = "bench__echo"


def task_of(messages: list[Message]) -> list[str]:
    """The run's input, "bench TAG N" or "bench TAG N DELAY_MS", split."""
    task = next((m.get("content") for m in messages if m.get("role") == "user"), "")
    return str(task).split()


def delay_of(messages: list[Message]) -> float:
    """Seconds the model takes to answer this run (the input's DELAY_MS; none by default)."""
    words = task_of(messages)
    return int(words[3]) / 1000 if len(words) > 3 else 0.0


class BenchScript:
    """The model's side of the workload. A run's input is "bench TAG N" (or "bench TAG N
    DELAY_MS", a model that takes that long to answer): the model asks for `N` echo calls,
    one at a time, then answers "done TAG". It calls the echo tool by the name the client
    offered it (`bench__echo` from Pizza Bot, `echo` from LangGraph's MCP adapter), so both
    clients meet the same script."""

    def __init__(self) -> None:
        #: (tag, tool results seen) → times the model was asked; only while `counting`.
        self.asked: Counter[tuple[str, int]] = Counter()
        self.counting = False

    def __call__(self, messages: list[Message], tools: list[dict[str, Any]]) -> Reply:
        _, tag, wanted, *_ = task_of(messages)
        done = count_role(messages, "tool")
        if self.counting:
            self.asked[(tag, done)] += 1
        if done < int(wanted):
            name = _offered(tools) or TOOL
            return Reply(tool_calls=[ToolCall(name=name, arguments={"tag": tag, "i": done})])
        return Reply(text=f"done {tag}")


def _offered(tools: list[dict[str, Any]]) -> str | None:
    for tool in tools:
        name = tool.get("function", {}).get("name")
        if isinstance(name, str) and name.endswith("echo"):
            return name
    return None


class BenchModelServer(ScriptedModelServer):
    """The scripted provider, closing each connection after its answer: every model call
    pays for a new TCP connection, as the comparison's did.

    `serve()` runs it on this process's one event loop rather than on the base class's thread:
    nothing else runs in this process, so the script may run right where the request is
    handled."""

    def __init__(self, script: BenchScript) -> None:
        super().__init__(script)
        self.bench_script = script
        self.client_ports: list[int] = []

    async def _run_script(self, messages: list[Message], tools: list[dict[str, Any]]) -> Reply:
        delay = delay_of(messages)
        if delay:
            await asyncio.sleep(delay)  # a slow model: the connection stays open meanwhile
        return self.bench_script(messages, tools)

    async def _openai_chat(self, request: Request) -> Response:
        if request.client is not None:
            self.client_ports.append(request.client.port)
        response = await super()._openai_chat(request)
        response.headers["connection"] = "close"
        return response

    def forget(self) -> None:
        """Drop what the server keeps per request, so long runs do not grow the process."""
        self.requests.clear()
        self.client_ports.clear()
        self.bench_script.asked.clear()

    def app(self) -> Starlette:
        script = self.bench_script

        async def calls(request: Request) -> Response:
            return JSONResponse(
                {"requests": len(self.requests), "connections": len(set(self.client_ports))}
            )

        async def asked(request: Request) -> Response:
            return JSONResponse([[tag, done, n] for (tag, done), n in script.asked.items()])

        async def counting(request: Request) -> Response:
            script.counting = bool((await request.json())["on"])
            return JSONResponse({"counting": script.counting})

        async def forget(request: Request) -> Response:
            self.forget()
            return JSONResponse({})

        return Starlette(
            routes=[
                Route("/v1/chat/completions", self._openai_chat, methods=["POST"]),
                Route("/bench/calls", calls, methods=["GET"]),
                Route("/bench/asked", asked, methods=["GET"]),
                Route("/bench/counting", counting, methods=["POST"]),
                Route("/bench/forget", forget, methods=["POST"]),
            ]
        )


async def serve() -> int:
    """Serve until stdin closes; 1 if the script ever raised (its tracebacks on stderr)."""
    import uvicorn

    server = BenchModelServer(BenchScript())
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    # The same settings as `ScriptedModelServer`'s own server.
    config = uvicorn.Config(
        server.app(),
        log_level="warning",
        access_log=False,
        lifespan="off",
        timeout_graceful_shutdown=2,
    )
    http = uvicorn.Server(config)
    loop = asyncio.get_running_loop()
    stdin = sys.stdin.fileno()

    def on_stdin() -> None:
        if not os.read(stdin, 4096):
            loop.remove_reader(stdin)
            http.should_exit = True

    loop.add_reader(stdin, on_stdin)
    serving = asyncio.create_task(http.serve(sockets=[sock]))
    while not http.started and not serving.done():
        await asyncio.sleep(0.01)
    if http.started:
        print(f"http://127.0.0.1:{port}", flush=True)
        # Nothing reads stdout after the first line: anything else printed goes to the log.
        os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    await serving
    sock.close()
    for error in server._script_errors:
        traceback.print_exception(error)
    return 1 if server._script_errors else 0


class ModelProcess:
    """The bench's handle on `python -m bench.model`, used as `async with`: starts it, and
    stops it at the end, on error too (closing its stdin; killing it if it does not go)."""

    def __init__(self, *, env: dict[str, str], log: Path) -> None:
        self.env = env
        self.log = log
        self.base = ""
        self._proc: asyncio.subprocess.Process | None = None
        self._client: httpx.AsyncClient | None = None

    @property
    def openai_base(self) -> str:
        return f"{self.base}/v1"

    @property
    def pid(self) -> int:
        assert self._proc is not None
        return self._proc.pid

    async def __aenter__(self) -> ModelProcess:
        import httpx

        log = os.open(self.log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            self._proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "bench.model",
                env=self.env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
            )
        finally:
            os.close(log)  # the child has its own copy
        try:
            assert self._proc.stdout is not None
            async with asyncio.timeout(60):  # not `wait_for`: it can lose a cancel on 3.11
                line = await self._proc.stdout.readline()
            if not line.startswith(b"http://"):
                raise RuntimeError(f"the model server did not start:\n{self.tail()}")
            self.base = line.decode().strip()
            self._client = httpx.AsyncClient(base_url=self.base, timeout=30)
        except BaseException:
            await self._stop()
            raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        code = await self._stop()
        if exc is None and code != 0:
            raise RuntimeError(f"the model server exited {code}:\n{self.tail()}")

    async def _stop(self) -> int | None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None
        proc, self._proc = self._proc, None
        if proc is None:
            return None
        if proc.returncode is None and proc.stdin is not None:
            proc.stdin.close()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(10):
                return await proc.wait()
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        return await proc.wait()

    def tail(self) -> str:
        try:
            return self.log.read_text(errors="replace")[-3000:]
        except OSError:
            return ""

    async def _call(self, method: str, path: str, body: Any = None) -> Any:
        assert self._client is not None, "the model server is not running"
        r = await self._client.request(method, path, json=body)
        r.raise_for_status()
        return r.json()

    async def forget(self) -> None:
        """Drop what the server keeps per request (bodies, client ports, the asked counts)."""
        await self._call("POST", "/bench/forget")

    async def counting(self, on: bool) -> None:
        """Count (or stop counting) how often each model step is asked."""
        await self._call("POST", "/bench/counting", {"on": on})

    async def asked(self) -> Counter[tuple[str, int]]:
        """(tag, tool results seen) → times the model was asked, while counting was on."""
        rows = await self._call("GET", "/bench/asked")
        return Counter({(str(tag), int(done)): int(n) for tag, done, n in rows})

    async def calls(self) -> tuple[int, int]:
        """Model calls answered since the last `forget()`, and the TCP connections they used."""
        data = await self._call("GET", "/bench/calls")
        return int(data["requests"]), int(data["connections"])


if __name__ == "__main__":
    sys.exit(asyncio.run(serve()))
