"""A loopback HTTP/1.1 proxy that adds `Authorization: Bearer TOKEN` to every request and
changes nothing else (not even `Host`): for a client that cannot send a header, such as the
MCP conformance suite, in front of `/mcp`, which never answers without a token.

Requests on a connection are read one at a time (head, then `Content-Length` bytes of
body); answers, SSE streams included, are piped back as they come.

    async with BearerProxy(port, token) as proxy:   # then talk to 127.0.0.1:proxy.port
"""

from __future__ import annotations

import asyncio
import contextlib
from types import TracebackType

__all__ = ["BearerProxy"]

MAX_HEAD = 64 * 1024


class BearerProxy:
    def __init__(self, target_port: int, token: str) -> None:
        self.target_port = target_port
        self.port = 0
        self._header = f"Authorization: Bearer {token}\r\n".encode()
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    async def __aenter__(self) -> BearerProxy:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        assert self._server is not None
        self._server.close()
        # Open SSE streams would keep wait_closed() waiting: close them first.
        for writer in list(self._writers):
            writer.close()
        await self._server.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            writer.close()
            return
        self._writers.update((writer, up_writer))
        back = asyncio.create_task(_pipe(up_reader, writer))
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                if len(head) > MAX_HEAD:
                    break
                first, _, rest = head.partition(b"\r\n")
                up_writer.write(first + b"\r\n" + self._header + rest)
                length = _content_length(rest)
                if length:
                    up_writer.write(await reader.readexactly(length))
                await up_writer.drain()
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
            pass
        finally:
            up_writer.close()
            with contextlib.suppress(Exception):
                await back
            self._writers.difference_update((writer, up_writer))


def _content_length(headers: bytes) -> int:
    for line in headers.split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return int(value.strip())
    return 0


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while chunk := await reader.read(65536):
            writer.write(chunk)
            await writer.drain()
    except ConnectionError:
        pass
    finally:
        writer.close()
