"""A callback receiver on loopback that answers as a hostile one would, path by path.

A request's `callback_url` is whatever its requester named, so the server must survive any
answer. `CallbackPeer` is a bare asyncio HTTP/1.1 server (no framework between the socket and
the test, so it can misbehave at the byte level) that records every post and, by path:

- ``/ok``: 200, empty body — a receiver that works;
- ``/wait``: 503 with ``Retry-After: 99999999999999`` (three million years);
- ``/drip``: starts its answer and never finishes it, one byte every `drip_every` seconds;
- ``/huge``: 200 announcing `huge_bytes` of body, written as fast as the client takes it.

Each connection's fate is kept (`Connection`): when it opened and closed, and how many bytes
of the answer the server took before it hung up, so a test sees what the server read.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass, field
from types import TracebackType

__all__ = ["CallbackPeer", "Connection", "Post"]

_CHUNK = b"x" * (64 * 1024)


@dataclass
class Post:
    path: str
    headers: dict[str, str]
    body: bytes
    at: float


@dataclass
class Connection:
    path: str
    opened: float
    closed: float | None = None
    #: Bytes of the answer the client accepted before it went away.
    answered: int = 0


@dataclass
class CallbackPeer:
    drip_every: float = 0.5
    huge_bytes: int = 64 * 1024 * 1024
    posts: list[Post] = field(default_factory=list)
    connections: list[Connection] = field(default_factory=list)
    port: int = 0
    _server: asyncio.Server | None = None
    _writers: set[asyncio.StreamWriter] = field(default_factory=set)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}/{path.lstrip('/')}"

    def posts_to(self, path: str) -> list[Post]:
        return [p for p in self.posts if p.path == f"/{path.lstrip('/')}"]

    def connections_to(self, path: str) -> list[Connection]:
        return [c for c in self.connections if c.path == f"/{path.lstrip('/')}"]

    async def __aenter__(self) -> CallbackPeer:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        assert self._server is not None
        self._server.close()
        for writer in list(self._writers):
            writer.close()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(5):
                await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        try:
            post = await _read_request(reader)
            if post is None:
                return
            self.posts.append(post)
            conn = Connection(post.path, opened=time.monotonic())
            self.connections.append(conn)
            try:
                await self._answer(post.path, reader, writer, conn)
            except (ConnectionError, OSError):
                pass  # the client hung up: what the test is looking for
            finally:
                conn.closed = time.monotonic()
        finally:
            self._writers.discard(writer)
            writer.close()

    async def _answer(
        self,
        path: str,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        conn: Connection,
    ) -> None:
        if path == "/wait":
            await _send(writer, conn, _head(503, "Retry-After: 99999999999999", length=0))
        elif path == "/drip":
            for byte in _head(200, length=2).decode():
                await _send(writer, conn, byte.encode())
                # Stop at once when the client hangs up, not at the next byte's write.
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self.drip_every):
                        if not await reader.read(1):
                            return
            raise AssertionError("the drip ran out: make the head longer or the drip slower")
        elif path == "/huge":
            await _send(writer, conn, _head(200, length=self.huge_bytes))
            while conn.answered < self.huge_bytes:
                await _send(writer, conn, _CHUNK)
        else:
            await _send(writer, conn, _head(200, length=0))


def _head(status: int, *extra: str, length: int) -> bytes:
    lines = [f"HTTP/1.1 {status} Whatever", f"Content-Length: {length}", *extra]
    # A long, slow head for /drip: every byte of it takes `drip_every`.
    lines += [f"X-Padding-{n}: {'.' * 40}" for n in range(40)]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


async def _send(writer: asyncio.StreamWriter, conn: Connection, data: bytes) -> None:
    writer.write(data)
    await writer.drain()
    conn.answered += len(data)


async def _read_request(reader: asyncio.StreamReader) -> Post | None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
        return None
    start, *lines = head.decode("latin-1").split("\r\n")
    path = start.split(" ")[1]
    headers = {}
    for line in lines:
        if ":" in line:
            name, value = line.split(":", 1)
            headers[name.strip().lower()] = value.strip()
    body = await reader.readexactly(int(headers.get("content-length", "0")))
    return Post(path, headers, body, at=time.monotonic())
