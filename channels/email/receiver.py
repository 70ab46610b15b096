"""`ImapReceiver`: the bot's mailbox, watched with IMAP IDLE, never given up on.

On every (re)connect it handles all UNSEEN mail first, so a reply that arrived while the
server or the mailbox was down is not missed. Then it IDLEs: the server pushes new mail
within a second or so. Where the server has no IDLE it polls. A dropped connection (the
server restarted, the network went away) reconnects with exponential backoff and jitter.

The connection is TLS from the start (`tls="tls"`, port 993) or upgraded with STARTTLS
(`tls="starttls"`, port 143; never silently left plaintext); `"none"` is for a server on
localhost. Login is a password, or SASL XOAUTH2 with a token from a `TokenSource` (Microsoft
365, Google): a refused token is exchanged for a fresh one once per connect.

Each message is handed to `handle(raw, size=..., fallback_id=...)` and then flagged `\\Seen`;
the handler records its Message-ID, so a message seen twice (a crash between the two steps,
two copies) is acted on once. A message the handler fails on stays unseen and is tried again
on the next pass, a few times, then flagged so it cannot block the mailbox.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import re
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from pizzabot.agent.tasks import stop_if_cancelled
from pizzabot.channels.email.imap_ext import StartTlsError, authenticate_xoauth2, starttls
from pizzabot.channels.email.oauth import OAuthRefused
from pizzabot.channels.email.ports import TokenSource

log = logging.getLogger(__name__)


class Handle(Protocol):
    async def __call__(self, raw: bytes, *, size: int | None, fallback_id: str) -> str: ...


ImapTls = Literal["tls", "starttls", "none"]


@dataclass(frozen=True)
class ImapConfig:
    host: str
    port: int = 993
    #: "tls" (993), "starttls" (143), "none" (localhost only); True / False mean tls / none.
    tls: ImapTls | bool = "tls"
    user: str = ""
    password: str = field(default="", repr=False)
    #: Certificates to trust instead of the system's (a private CA); None: the system's.
    ssl_context: ssl.SSLContext | None = field(default=None, repr=False, compare=False)
    folder: str = "INBOX"
    #: End IDLE and look again this often, even without a push (a safety net, and it
    #: notices a silently dead connection).
    idle_refresh: float = 300.0
    #: Polling interval, only for servers without IDLE.
    poll_interval: float = 60.0
    backoff_initial: float = 0.5
    backoff_max: float = 60.0
    timeout: float = 30.0
    max_bytes: int = 5_000_000
    max_failures: int = 3
    #: False polls even where the server offers IDLE (for a server whose IDLE misbehaves).
    idle: bool = True

    @property
    def tls_mode(self) -> ImapTls:
        if isinstance(self.tls, bool):
            return "tls" if self.tls else "none"
        return self.tls


class ConnectionLost(Exception):
    pass


class LoginRefused(Exception):
    pass


_SIZE = re.compile(rb"RFC822\.SIZE (\d+)")
_UID = re.compile(rb"UID (\d+)")


def _bodies(response: Any) -> list[bytes]:
    return [bytes(line) for line in response.lines if isinstance(line, bytearray)]


class ImapReceiver:
    def __init__(
        self,
        config: ImapConfig,
        handle: Handle,
        *,
        tokens: TokenSource | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.config = config
        self.handle = handle
        #: Set: log in with SASL XOAUTH2 and these tokens instead of the password.
        self.tokens = tokens
        self.sleep = sleep
        #: Set while logged in with the folder selected (tests wait on it).
        self.connected = asyncio.Event()
        self.connects = 0
        #: Failed connects and dropped connections so far (each one waits out a backoff).
        self.failures = 0
        self._failures: dict[str, int] = {}
        self._lost = asyncio.Event()

    # -- the loop ------------------------------------------------------------------------

    async def run_forever(self) -> None:
        delay = self.config.backoff_initial
        while True:
            stop_if_cancelled()
            client = None
            try:
                client = await self._connect()
                delay = self.config.backoff_initial
                await self._serve(client)
            except asyncio.CancelledError:
                raise
            except LoginRefused as exc:
                self.failures += 1
                log.error("IMAP login refused for %s: %s", self.config.user, exc)
                delay = self.config.backoff_max
            except Exception as exc:
                self.failures += 1
                log.warning(
                    "IMAP %s:%s: %s: %s; reconnecting in %.1fs",
                    self.config.host,
                    self.config.port,
                    type(exc).__name__,
                    exc,
                    delay,
                )
            finally:
                self.connected.clear()
                if client is not None:
                    await self._close(client)
            await self.sleep(delay * random.uniform(0.8, 1.2))
            delay = min(self.config.backoff_max, delay * 2)

    async def _connect(self) -> Any:
        import aioimaplib

        c = self.config
        self._lost = asyncio.Event()
        lost = self._lost

        def on_lost(_exc: Exception | None) -> None:
            lost.set()

        mode = c.tls_mode
        context = c.ssl_context or ssl.create_default_context()
        client = aioimaplib.IMAP4(
            host=c.host,
            port=c.port,
            timeout=c.timeout,
            conn_lost_cb=on_lost,
            ssl_context=context if mode == "tls" else None,
        )
        try:
            await client.wait_hello_from_server()
            if mode == "starttls":
                try:
                    await starttls(
                        client, ssl_context=context, server_hostname=c.host, timeout=c.timeout
                    )
                except StartTlsError as exc:
                    # Not retried quickly: no login may go out over this connection.
                    raise LoginRefused(str(exc)) from None
            if self.tokens is None:
                response = await client.login(c.user, c.password)
            else:
                response = await self._xoauth2(client, self.tokens)
            if response.result != "OK":
                raise LoginRefused(_text(response))
            selected = await client.select(c.folder)
            if selected.result != "OK":
                raise LoginRefused(f"cannot open folder {c.folder!r}: {_text(selected)}")
        except BaseException:
            await self._close(client)
            raise
        self.connects += 1
        self.connected.set()
        log.info("IMAP connected to %s:%s/%s", c.host, c.port, c.folder)
        return client

    async def _xoauth2(self, client: Any, tokens: TokenSource) -> Any:
        """Log in with a cached token; once refused, with a freshly fetched one."""
        c = self.config
        response = None
        for _ in range(2):
            try:
                token = await tokens.token()
            except OAuthRefused as exc:
                raise LoginRefused(str(exc)) from None
            # Any other OAuthError (endpoint down) goes up: reconnecting later retries it.
            response = await authenticate_xoauth2(client, c.user, token, timeout=c.timeout)
            if response.result == "OK":
                return response
            tokens.invalidate(token)
            log.info("IMAP refused the access token for %s; fetching a new one", c.user)
        return response

    async def _close(self, client: Any) -> None:
        # Exception, not BaseException: a cancel arriving here must still stop the loop.
        with contextlib.suppress(Exception):
            if not self._lost.is_set():
                # asyncio.timeout, not wait_for: Python 3.11's wait_for can lose a cancel.
                async with asyncio.timeout(2.0):
                    await client.logout()
        with contextlib.suppress(Exception):
            transport = client.protocol.transport
            if transport is not None:
                transport.close()

    async def _serve(self, client: Any) -> None:
        idle = self.config.idle and client.has_capability("IDLE")
        while True:
            stop_if_cancelled()  # aioimaplib waits with wait_for, which can lose a cancel
            await self.process_unseen(client)
            if idle:
                await self._idle(client)
            else:
                await self._wait_lost(self.config.poll_interval)
                await client.noop()

    async def _wait_lost(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):  # not wait_for: it can swallow a cancel (3.11)
                await self._lost.wait()
        if self._lost.is_set():
            raise ConnectionLost("the server closed the connection")

    async def _idle(self, client: Any) -> None:
        """IDLE until mail arrives, the refresh interval ends, or the connection drops."""
        import aioimaplib

        loop = asyncio.get_running_loop()
        # aioimaplib's own auto-stop is set past ours: we end IDLE ourselves.
        idle_task = await client.idle_start(timeout=self.config.idle_refresh + 60)
        deadline = loop.time() + self.config.idle_refresh
        lost_task = asyncio.ensure_future(self._lost.wait())
        push_task: asyncio.Future[Any] | None = None
        try:
            while True:
                stop_if_cancelled()
                remaining = deadline - loop.time()
                if remaining <= 0:
                    break
                push_task = asyncio.ensure_future(client.wait_server_push(timeout=remaining))
                done, _ = await asyncio.wait(
                    {push_task, lost_task}, return_when=asyncio.FIRST_COMPLETED
                )
                if lost_task in done:
                    push_task.cancel()
                    raise ConnectionLost("the server closed the connection")
                try:
                    push = push_task.result()
                except TimeoutError:
                    break
                if push == aioimaplib.STOP_WAIT_SERVER_PUSH:
                    break
                lines = [bytes(p) for p in push] if isinstance(push, list) else []
                if any(b"BYE" in line for line in lines):
                    raise ConnectionLost("the server said BYE")
                if any(line.endswith((b"EXISTS", b"RECENT")) for line in lines):
                    break
        finally:
            lost_task.cancel()
            if push_task is not None and not push_task.done():
                push_task.cancel()
            if not self._lost.is_set():
                client.idle_done()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self.config.timeout):
                        await idle_task
        if self._lost.is_set():
            raise ConnectionLost("the server closed the connection")

    # -- one pass ------------------------------------------------------------------------

    async def process_unseen(self, client: Any) -> int:
        """Handle every unseen message, oldest first, until a pass finds none; return how many."""
        total = 0
        while True:
            handled = 0
            for uid in await self._unseen(client):
                if await self._one(client, uid):
                    handled += 1
            total += handled
            if handled == 0:
                return total

    async def _unseen(self, client: Any) -> list[str]:
        response = await client.uid_search("UNSEEN", charset=None)
        if response.result != "OK":
            raise ConnectionLost(f"SEARCH failed: {_text(response)}")
        uids: list[str] = []
        for line in response.lines:
            text = bytes(line).decode(errors="replace").strip()
            if text and all(part.isdigit() for part in text.split()):
                uids.extend(text.split())
        return sorted(uids, key=int)

    async def _one(self, client: Any, uid: str) -> bool:
        """Handle one message; True when it was flagged seen (handled, or given up on)."""
        self._check_lost()
        meta = await client.uid("fetch", uid, "(UID RFC822.SIZE)")
        if meta.result != "OK":
            raise ConnectionLost(f"FETCH failed: {_text(meta)}")
        size_match = next(
            (m for line in meta.lines if (m := _SIZE.search(bytes(line))) is not None), None
        )
        if size_match is None:
            return False  # expunged meanwhile
        size = int(size_match.group(1))
        part = "BODY.PEEK[HEADER]" if size > self.config.max_bytes else "BODY.PEEK[]"
        fetched = await client.uid("fetch", uid, f"({part})")
        bodies = _bodies(fetched)
        if fetched.result != "OK" or not bodies:
            raise ConnectionLost(f"FETCH failed: {_text(fetched)}")
        fallback = f"imap:{self.config.user}:{self.config.folder}:{uid}"
        try:
            outcome = await self.handle(bodies[0], size=size, fallback_id=fallback)
        except Exception:
            failures = self._failures.get(uid, 0) + 1
            self._failures[uid] = failures
            log.exception("handling mail uid %s failed (attempt %d)", uid, failures)
            if failures < self.config.max_failures:
                return False
            log.error("giving up on mail uid %s after %d attempts", uid, failures)
            outcome = "given up"
        self._failures.pop(uid, None)
        stored = await client.uid("store", uid, "+FLAGS.SILENT", r"(\Seen)")
        if stored.result != "OK":
            raise ConnectionLost(f"STORE failed: {_text(stored)}")
        log.debug("mail uid %s: %s", uid, outcome)
        return True

    def _check_lost(self) -> None:
        if self._lost.is_set():
            raise ConnectionLost("the server closed the connection")


def _text(response: Any) -> str:
    return " ".join(bytes(line).decode(errors="replace") for line in response.lines)[:300]
