"""An HTTP forward proxy on loopback that serves a few pages itself: the public web, for a
fetch server started with `--proxy-url`, without a test reaching the network.

    async with WebProxy({"http://acme.example/news": "<html>…</html>"}) as web:
        ...  # give the fetch server --proxy-url web.url; web.requested lists what it asked

A client sends a proxy the whole URL (`GET http://acme.example/news HTTP/1.1`), so the host
is never looked up or connected to. Each page is answered as HTML, `/robots.txt` as "allow
everything" unless given, anything else 404; `CONNECT` (HTTPS) is refused with 405.
"""

from __future__ import annotations

import asyncio
import contextlib
from types import TracebackType

__all__ = ["WebProxy"]

ALLOW_ALL = "User-agent: *\nAllow: /\n"


class WebProxy:
    def __init__(self, pages: dict[str, str]) -> None:
        self.pages = dict(pages)
        #: Every URL asked for, in order (robots.txt included).
        self.requested: list[str] = []
        self.port = 0
        self._server: asyncio.Server | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def __aenter__(self) -> WebProxy:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    def _answer(self, method: str, url: str) -> tuple[str, str, str]:
        """(status line, content type, body) for one request."""
        if method == "CONNECT":
            return "405 Method Not Allowed", "text/plain", "this proxy serves only http:// pages"
        self.requested.append(url)
        if url in self.pages:
            kind = "text/plain" if url.endswith("/robots.txt") else "text/html; charset=utf-8"
            return "200 OK", kind, self.pages[url]
        if url.endswith("/robots.txt"):
            return "200 OK", "text/plain", ALLOW_ALL
        return "404 Not Found", "text/plain", "no such page"

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            method, url, _ = head.split(b"\r\n", 1)[0].decode("latin-1").split(" ", 2)
            status, kind, text = self._answer(method, url)
            body = text.encode()
            writer.write(
                f"HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {len(body)}\r\n"
                "Connection: close\r\n\r\n".encode()
                + body
            )
            await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, ValueError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()
