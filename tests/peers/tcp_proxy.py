"""A TCP proxy on loopback that can drop every connection it carries, while the server behind
it stays up: what a flaky network, a load balancer's idle cut or a laptop's Wi-Fi does to a
long HTTP stream.

    async with TcpProxy(port) as proxy:   # then talk to 127.0.0.1:proxy.port
        proxy.drop()                      # every open connection is cut; new ones go through
"""

from __future__ import annotations

import asyncio
import contextlib
from types import TracebackType

__all__ = ["TcpProxy"]


class TcpProxy:
    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.port = 0
        self._writers: set[asyncio.StreamWriter] = set()
        self._server: asyncio.Server | None = None

    async def __aenter__(self) -> TcpProxy:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.drop()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    def drop(self) -> int:
        """Cut every connection open now (an abort: no orderly close); how many were cut."""
        writers, self._writers = list(self._writers), set()
        for writer in writers:
            writer.transport.abort()
        return len(writers)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        self._writers |= {writer, up_writer}
        await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        with contextlib.suppress(Exception):
            writer.close()
