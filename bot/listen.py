"""How `pizzabot serve` listens: uvicorn's configuration, with the limits a server that faces a
network needs.

uvicorn closes idle kept-alive connections, but has no time limit for a request's headers: a
client that opens a connection and sends half a request line keeps it (and a slot) forever.
`HeaderTimeoutProtocol` closes a connection that has not finished a request's headers within
`header_timeout` seconds of opening or of its last response; a body that is slow to arrive is
`pizzabot.channels.http.guard.BodyLimit`'s job. `max_connections` caps connections and requests in flight
(more get 503), and forwarded headers (`X-Forwarded-For`, `-Proto`) count only from the
addresses in `trusted_proxies` — by default from none, since anyone can set them.
"""

from __future__ import annotations

import asyncio
from typing import Any

import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol


class HeaderTimeoutProtocol(H11Protocol):
    """h11 with a deadline for each request's headers (`header_timeout`, set per server)."""

    header_timeout: float = 10.0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._idle_since = self.loop.time()
        self._watch: asyncio.TimerHandle | None = self.loop.call_later(
            self.header_timeout, self._check
        )

    def on_response_complete(self) -> None:
        self._idle_since = self.loop.time()  # the next request's headers are due from now
        super().on_response_complete()

    def _check(self) -> None:
        """Close the connection if it has been between requests for a whole `header_timeout`
        (since it opened or since its last response); a request being answered, or a
        WebSocket that took the connection over, is left alone."""
        self._watch = None
        if self.transport.is_closing() or self.transport.get_protocol() is not self:
            return
        left = self.header_timeout
        if self.cycle is None or self.cycle.response_complete:
            left -= self.loop.time() - self._idle_since
            if left <= 0:
                self.transport.close()
                return
        self._watch = self.loop.call_later(left, self._check)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._watch is not None:
            self._watch.cancel()
            self._watch = None
        super().connection_lost(exc)


def protocol_with(header_timeout: float) -> type[H11Protocol]:
    class Configured(HeaderTimeoutProtocol):
        pass

    Configured.header_timeout = header_timeout
    return Configured


def trusted(value: str) -> list[str]:
    """`trusted_proxies` as uvicorn takes it: addresses or networks, comma-separated."""
    return [part.strip() for part in value.split(",") if part.strip()]


def config(
    app: Any,
    *,
    host: str,
    port: int,
    header_timeout: float,
    keepalive_timeout: int,
    max_connections: int,
    trusted_proxies: str,
    **extra: Any,
) -> uvicorn.Config:
    proxies = trusted(trusted_proxies)
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        http=protocol_with(header_timeout),
        timeout_keep_alive=keepalive_timeout,
        limit_concurrency=max_connections,
        # uvicorn trusts 127.0.0.1 by default; behind nothing, no address is a proxy.
        proxy_headers=bool(proxies),
        forwarded_allow_ips=proxies or [],
        server_header=False,
        **extra,
    )
