"""Slack's own address, answered on loopback: an HTTP proxy that takes `CONNECT slack.com:443`
(and other Slack hosts), ends the TLS itself with a test CA's certificate for those names, and
hands the decrypted requests to the Slack Web API fake (`tests.peers.slack_api.SlackApi`).

It is for a third-party program that calls `https://slack.com/api/...` with no base-URL
setting but honours a proxy and a CA file, such as korotovsky's `slack-mcp-server`
(`SLACK_MCP_PROXY`, `SLACK_MCP_SERVER_CA`). It never connects anywhere but the fake: a request
for any other host, or a plain (non-`CONNECT`) proxy request, is answered 403 and kept in
`refused`, so nothing the program sends can reach the internet through it.

    async with SlackApi() as slack, SlackProxy(slack.port, tmp_path) as proxy:
        env = {"SLACK_MCP_PROXY": proxy.url, "SLACK_MCP_SERVER_CA": str(proxy.certs.ca_file)}
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from types import TracebackType

from tests.peers.certs import TestCertificates, make_certificates

__all__ = ["SLACK_HOSTS", "SlackProxy"]

#: The names the certificate covers and the proxy answers for.
SLACK_HOSTS = ("slack.com", "*.slack.com")
MAX_HEAD = 16 * 1024


def _is_slack(host: str) -> bool:
    return host == "slack.com" or (host.endswith(".slack.com") and host.count(".") == 2)


class SlackProxy:
    def __init__(self, api_port: int, folder: Path) -> None:
        self.api_port = api_port
        self.certs: TestCertificates = make_certificates(folder / "slack-tls", names=SLACK_HOSTS)
        self.port = 0
        #: `host:port` of every tunnel opened to the fake, in order.
        self.tunnels: list[str] = []
        #: The request line of everything refused (not a `CONNECT` to a Slack host).
        self.refused: list[str] = []
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def __aenter__(self) -> SlackProxy:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        for writer in list(self._writers):
            writer.transport.abort()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
            writer.close()
            return
        line = head[:MAX_HEAD].split(b"\r\n", 1)[0].decode("latin-1")
        method, _, rest = line.partition(" ")
        target = rest.partition(" ")[0]
        host, _, port = target.rpartition(":")
        if method != "CONNECT" or port != "443" or not _is_slack(host.lower()):
            self.refused.append(line)
            writer.write(
                b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            )
            with contextlib.suppress(ConnectionError):
                await writer.drain()
            writer.close()
            return
        self.tunnels.append(target)
        writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        try:
            await writer.drain()
            await writer.start_tls(self.certs.server_context())
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.api_port)
        except (ConnectionError, OSError):
            writer.transport.abort()
            return
        self._writers.add(up_writer)
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
