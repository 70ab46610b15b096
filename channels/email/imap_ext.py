"""IMAP STARTTLS and a complete SASL XOAUTH2 exchange on top of aioimaplib 2.0.3.

aioimaplib knows the STARTTLS command (it is in its command table) but has no method
for it, and its `xoauth2` waits out its whole time-out when the server refuses a token:
a refusal arrives as a `+ <base64 JSON>` continuation that the client must answer (with
an empty line) before the server sends its tagged NO. Both are small, so they live here,
written the way aioimaplib's own methods are (a `Command` run through the protocol's
`execute`, state changed under its `state_condition`), and touch nothing else of it.

    starttls(client, ...)          port 143: STARTTLS, then TLS on the same connection
    authenticate_xoauth2(client)   AUTHENTICATE XOAUTH2, refusal answered, never hangs

STARTTLS is all or nothing: a server that does not offer it is an error, never a silent
plaintext login, and bytes sent after the server's OK but before the TLS handshake (an
attacker's injected responses) end the connection instead of being read as the server's.
"""

from __future__ import annotations

import asyncio
import base64
import ssl
from typing import Any

from aioimaplib import aioimaplib as _imap


class StartTlsError(Exception):
    """The server cannot or did not switch this connection to TLS."""


class _GuardedStartTls:
    """Passes the server's plaintext through up to the STARTTLS command's tagged reply and
    drops (and remembers) anything after it: those bytes were not protected by TLS and
    cannot have come from the server in a correct exchange."""

    def __init__(self, protocol: Any, tag: str) -> None:
        self._protocol = protocol
        self._receive = protocol.data_received
        self._prefix = tag.encode() + b" "
        self._buffer = b""
        self._done = False
        self.injected = False

    def __call__(self, data: bytes) -> None:
        if self._done:
            self.injected = self.injected or bool(data)
            return
        self._buffer += data
        start = 0
        while (end := self._buffer.find(b"\r\n", start)) != -1:
            if self._buffer.startswith(self._prefix, start):
                self._done = True
                self.injected = end + 2 < len(self._buffer)
                self._receive(self._buffer[: end + 2])
                self._buffer = b""
                return
            start = end + 2
        # Complete untagged lines go up as they come; a partial line waits here.
        if start:
            self._receive(self._buffer[:start])
            self._buffer = self._buffer[start:]

    def restore(self) -> None:
        self._protocol.data_received = self._receive


async def starttls(
    client: Any, *, ssl_context: ssl.SSLContext, server_hostname: str, timeout: float
) -> None:
    """Upgrade a connected, not yet authenticated `aioimaplib.IMAP4` client to TLS.

    Afterwards the client's capabilities are read again over TLS (RFC 3501 6.2.1: the
    ones read before may have been forged).
    """
    protocol = client.protocol
    if "STARTTLS" not in protocol.capabilities:
        raise StartTlsError("the server does not offer STARTTLS")
    loop = asyncio.get_running_loop()
    command = _imap.Command("STARTTLS", protocol.new_tag(), loop=loop)
    guard = _GuardedStartTls(protocol, command.tag)
    protocol.data_received = guard
    try:
        async with asyncio.timeout(timeout):
            response = await protocol.execute(command)
    finally:
        guard.restore()
    if response.result != "OK":
        raise StartTlsError(f"the server refused STARTTLS: {_text(response)}")
    if guard.injected:
        raise StartTlsError("the server sent data after agreeing to STARTTLS")
    transport = await loop.start_tls(
        protocol.transport,
        protocol,
        ssl_context,
        server_hostname=server_hostname,
        ssl_handshake_timeout=timeout,
    )
    protocol.transport = transport
    async with asyncio.timeout(timeout):
        await protocol.capability()


async def authenticate_xoauth2(client: Any, user: str, token: str, *, timeout: float) -> Any:
    """SASL XOAUTH2 (Google's and Microsoft's format); returns aioimaplib's `Response`.

    The credentials go after the server's first `+`, not on the command line (SASL-IR):
    aioimaplib logs a running command's text at DEBUG, so they must never be part of it
    (and this is the form Microsoft documents). A later `+` carries the refusal's JSON; it
    is answered with an empty line so the server finishes with NO.
    """
    protocol = client.protocol
    initial = base64.b64encode(f"user={user}\x01auth=Bearer {token}\x01\x01".encode()).decode()
    command = _Xoauth2Command(protocol, protocol.new_tag(), initial)
    async with asyncio.timeout(timeout):
        async with protocol.state_condition:
            response = await protocol.execute(command)
            if response.result == "OK":
                protocol.state = _imap.AUTH
                for line in response.lines:
                    if isinstance(line, bytes) and line.startswith(b"CAPABILITY"):
                        protocol.capabilities = set(line.decode().split()[1:])
            protocol.state_condition.notify_all()
    return response


class _Xoauth2Command(_imap.Command):  # type: ignore[misc]  # aioimaplib is untyped
    def __init__(self, protocol: Any, tag: str, initial: str) -> None:
        super().__init__("AUTHENTICATE", tag, "XOAUTH2", loop=protocol.loop)
        self._protocol = protocol
        self._pending: str | None = initial

    def append_to_resp(self, line: bytes, result: str = "Pending") -> None:
        # aioimaplib hands continuation lines of the running command to it here.
        if result == "Pending" and isinstance(line, bytes) and line.startswith(b"+"):
            # Written straight to the transport: aioimaplib's send() would log it.
            answer, self._pending = self._pending or "", None
            self._protocol.transport.write(answer.encode() + b"\r\n")
            return
        super().append_to_resp(line, result)


def _text(response: Any) -> str:
    return " ".join(bytes(line).decode(errors="replace") for line in response.lines)[:300]
