"""Connections cannot be held open for free: a request whose headers or body stall is cut off
(with small configured timeouts here), connections beyond `max_connections` get 503, and
`X-Forwarded-For` counts only from a configured proxy. The timeouts run against a real
`pizzabot serve`; the connection cap and the proxy rule against the uvicorn configuration
`serve` builds (`pizzabot.bot.listen.config`), serving a probe app over a real socket."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import uvicorn

from pizzabot.bot import listen
from tests.peers.server import TOKEN, ServerProcess
from tests.waiting import eventually

#: Bounds a read that must end, so a test of the old behaviour fails instead of hanging.
GUARD = 30.0

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def server(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[ServerProcess]:
    root: Path = tmp_path_factory.mktemp("http-timeouts")
    proc = ServerProcess(
        data_dir=root / "data",
        skills_dir=root,
        args=["--no-worker"],
        env={"PIZZABOT_HEADER_TIMEOUT": "0.5", "PIZZABOT_BODY_TIMEOUT": "0.5"},
    )
    await proc.start()
    try:
        yield proc
    finally:
        proc.stop()


async def until_closed(reader: asyncio.StreamReader) -> bytes:
    """Everything the server sends until it closes the connection."""
    async with asyncio.timeout(GUARD):
        return await reader.read(-1)


async def test_a_connection_that_never_finishes_its_headers_is_closed(
    server: ServerProcess,
) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    try:
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")  # no blank line: never ends
        await writer.drain()
        assert await until_closed(reader) == b""
    finally:
        writer.close()


async def test_a_kept_alive_connection_that_starts_a_request_and_stalls_is_closed(
    server: ServerProcess,
) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    try:
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        await writer.drain()
        assert (await reader.readline()).startswith(b"HTTP/1.1 200")
        writer.write(b"GET /healthz HTTP/1.1\r\n")  # the next request, half sent
        await writer.drain()
        rest = await until_closed(reader)
        assert b"HTTP/1.1" not in rest.split(b"\r\n\r\n", 1)[1]  # no second answer
    finally:
        writer.close()


async def test_a_body_that_stalls_gets_408_and_the_connection_closes(
    server: ServerProcess,
) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    try:
        writer.write(
            b"POST /api/runs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            + f"Authorization: Bearer {TOKEN}\r\nContent-Length: 100\r\n\r\n".encode()
            + b'{"skill": '
        )
        await writer.drain()
        raw = await until_closed(reader)
    finally:
        writer.close()
    assert raw.startswith(b"HTTP/1.1 408")
    assert json.loads(raw.split(b"\r\n\r\n", 1)[1])["detail"].startswith("the body did not arrive")


# -- the uvicorn configuration of `serve`, over a real socket ------------------------------


async def probe(scope: Any, receive: Any, send: Any) -> None:
    """Answers with the client address uvicorn hands the app."""
    if scope["type"] != "http":
        return
    body = json.dumps({"client": scope["client"][0], "scheme": scope["scheme"]}).encode()
    headers = [(b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})


@contextlib.asynccontextmanager
async def serving(**overrides: Any) -> AsyncIterator[int]:
    options: dict[str, Any] = {
        "header_timeout": 10.0,
        "keepalive_timeout": 5,
        "max_connections": 1000,
        "trusted_proxies": "",
        **overrides,
    }
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = int(sock.getsockname()[1])
    cfg = listen.config(probe, host="127.0.0.1", port=port, log_level="warning", **options)
    server = uvicorn.Server(cfg)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:

        def started() -> bool:
            if task.done():  # a server that died says why, at once
                task.result()
                raise AssertionError("uvicorn stopped before it started")
            return server.started

        await eventually(started, what="uvicorn to start", interval=0.01)
        yield port
    finally:
        server.should_exit = True
        await task


async def ask(port: int, *headers: str) -> tuple[int, dict[str, Any]]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    head = "".join(f"{h}\r\n" for h in headers)
    writer.write(f"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n{head}\r\n".encode())
    await writer.drain()
    raw = await until_closed(reader)
    writer.close()
    status = int(raw.split(b" ", 2)[1])
    body = raw.split(b"\r\n\r\n", 1)[1]
    return status, json.loads(body) if status == 200 else {}


async def test_forwarded_headers_count_only_from_a_configured_proxy() -> None:
    spoof = ("X-Forwarded-For: 203.0.113.9", "X-Forwarded-Proto: https")
    async with serving() as port:
        assert await ask(port, *spoof) == (200, {"client": "127.0.0.1", "scheme": "http"})
    async with serving(trusted_proxies="127.0.0.1") as port:
        assert await ask(port, *spoof) == (200, {"client": "203.0.113.9", "scheme": "https"})


async def test_connections_beyond_the_cap_get_503() -> None:
    async with serving(max_connections=3) as port:
        held = [await asyncio.open_connection("127.0.0.1", port) for _ in range(3)]
        try:
            status, _ = await ask(port)
        finally:
            for _, writer in held:
                writer.close()
        assert status == 503


# -- the header deadline counts from the last response, on the loop's own clock -------------


class Timer:
    def __init__(self, when: float, callback: Callable[[], None]) -> None:
        self.when, self.callback, self.cancelled = when, callback, False

    def cancel(self) -> None:
        self.cancelled = True


class Clock:
    """The running loop, with its time and its timers in the test's hands: `advance` fires
    the timers due, in order. Tasks still run on the real loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop, self.now, self.timers = loop, 0.0, list[Timer]()

    def time(self) -> float:
        return self.now

    def call_later(self, delay: float, callback: Callable[[], None]) -> Timer:
        timer = Timer(self.now + delay, callback)
        self.timers.append(timer)
        return timer

    def advance(self, to: float) -> None:
        while due := sorted(
            (t for t in self.timers if not t.cancelled and t.when <= to), key=lambda t: t.when
        ):
            self.timers.remove(due[0])
            self.now = due[0].when
            due[0].callback()
        self.now = to

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loop, name)


class Pipe(asyncio.Transport):
    """The server's end of a connection: what it wrote, and whether it closed."""

    def __init__(self) -> None:
        super().__init__()
        self.out, self.closed, self.protocol = bytearray(), False, None

    def write(self, data: Any) -> None:
        self.out += data

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed

    def get_protocol(self) -> Any:
        return self.protocol

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 40000), "sockname": ("127.0.0.1", 8000)}.get(name)

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


async def test_a_long_poll_answered_just_before_a_header_check_keeps_its_connection() -> None:
    """A long-poll held across checks and answered just before one: the client's next
    request, sent a moment later, still finds the connection open; the connection closes
    `header_timeout` after that last answer, not at the check after it."""
    answer = asyncio.Event()

    async def long_poll(scope: Any, receive: Any, send: Any) -> None:
        if scope["path"] == "/wait":
            await answer.wait()
        headers = [(b"content-length", b"2")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": b"ok"})

    cfg = listen.config(
        long_poll,
        host="127.0.0.1",
        port=8000,
        header_timeout=10.0,
        keepalive_timeout=600,  # only the header deadline closes here
        max_connections=10,
        trusted_proxies="",
        log_level="warning",
        access_log=False,
    )
    cfg.load()
    clock = Clock(asyncio.get_running_loop())
    proto = cfg.http_protocol_class(cfg, uvicorn.server.ServerState(), {}, _loop=clock)
    pipe = Pipe()
    pipe.protocol = proto
    proto.connection_made(pipe)

    async def answered(n: int) -> None:
        await eventually(lambda: pipe.out.count(b"HTTP/1.1 200") == n, what=f"answer {n}")

    proto.data_received(b"GET /wait HTTP/1.1\r\nHost: x\r\n\r\n")
    clock.advance(10.0)  # a check while the long-poll is held: left alone
    clock.advance(19.9)
    answer.set()
    await answered(1)
    clock.advance(20.0)  # the next check, a tenth of a second after the answer
    assert not pipe.closed
    clock.advance(21.0)
    proto.data_received(b"GET /again HTTP/1.1\r\nHost: x\r\n\r\n")  # the agent asks again
    await answered(2)
    clock.advance(30.9)
    assert not pipe.closed
    clock.advance(31.0)  # ten seconds after its last answer, with no request since
    assert pipe.closed
