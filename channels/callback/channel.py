"""`CallbackChannel`: post a request's decision to its callback URL, signed.

The body is the request's state as `GET /api/requests/{id}` answers it. It carries
`X-Pizzabot-Timestamp` (Unix seconds), `Idempotency-Key` (the request's id: a receiver drops a
repeat by it, since a retry after a lost answer posts the same body again) and
`X-Pizzabot-Signature: sha256=<hex HMAC-SHA256>` over

    "pizzabot-callback-v1" LF timestamp LF idempotency-key LF body

keyed with the skill's secret (`callback_secret_env`), handed over by `bot/` as a function;
without one the delivery fails for good.

The label makes a callback's signature mean "a callback" and nothing else. Webhooks
(`pizzabot.channels.triggers.hooks`) sign ``timestamp LF key LF body``, the same shape without it, so where one secret
served both, a captured callback (its key is the request's id) was a valid webhook and
started a run. A webhook's signed bytes begin with its timestamp's digits, so no callback's
can be read as one, nor a webhook's as a callback's; webhook senders change nothing, and a
callback receiver checks the label (docs/api.md shows how).

A callback URL is whoever the requester named, so the answer is trusted for nothing but its
status: the status line and headers are read (httpcore refuses headers over 100 KiB), the
body never is, and the connection is closed unread. How long a post may take in all is the
outbox's deadline, not this module's. An answer of 2xx is done; 408, 429 and 5xx, a timeout
or a refused connection are retried by the outbox (which honours `Retry-After` up to its
ceiling); any other status is final. Redirects are not followed.

Each callback URL's origin is a receiver of its own to the outbox (`target`): it sends to a
bounded number of origins at once, a few at a time each, so a receiver that answers slowly or
not at all holds only its own callbacks, never another's.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Callable
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from pizzabot.agent.addresses import DeliveryRef
from pizzabot.agent.channel import DeliveryError, retry_after_seconds
from pizzabot.agent.model import Delivery, Item, ItemStatus
from pizzabot.agent.requests import state_of
from pizzabot.agent.store import RequestStore
from pizzabot.channels.requests_wire import wire_state

if TYPE_CHECKING:
    import httpx

__all__ = ["LABEL", "CallbackChannel", "origin", "sign", "signed_bytes"]

TIMESTAMP_HEADER = "X-Pizzabot-Timestamp"
SIGNATURE_HEADER = "X-Pizzabot-Signature"
IDEMPOTENCY_HEADER = "Idempotency-Key"
_RETRIED = {408, 429}
_DEFAULT_PORTS = {"http": 80, "https": 443}


#: What a callback's signed bytes begin with: no webhook's can (theirs begin with digits).
LABEL = b"pizzabot-callback-v1\n"


def signed_bytes(timestamp: str, body: bytes, *, key: str) -> bytes:
    """What a callback's signature covers: ``LABEL timestamp LF key LF body``."""
    return LABEL + timestamp.encode() + b"\n" + key.encode("latin-1") + b"\n" + body


def sign(secret: str, timestamp: str, body: bytes, *, key: str) -> str:
    """The signature header value: "sha256=<hex>" over `signed_bytes`."""
    mac = hmac.new(secret.encode(), signed_bytes(timestamp, body, key=key), hashlib.sha256)
    return "sha256=" + mac.hexdigest()


def origin(url: str) -> str:
    """`url`'s origin, written one way ("scheme://host:port", lower case, the port always
    given), so that two spellings of one receiver are one receiver; the URL itself where it
    has none (it fails when posted to, and is a receiver of its own meanwhile)."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port or _DEFAULT_PORTS.get(parts.scheme.lower())
    except ValueError:
        return url
    if not parts.hostname or port is None:
        return url
    return f"{parts.scheme.lower()}://{parts.hostname.rstrip('.')}:{port}"


class CallbackChannel:
    name = "callback"

    def __init__(
        self,
        *,
        store: RequestStore,
        secret_for: Callable[[str], str | None],
        base_url: str = "",
        http: httpx.AsyncClient | None = None,
        timeout: float = 10.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.secret_for = secret_for
        self.base_url = base_url
        self._http = http
        self._timeout = timeout
        self._clock = clock

    def target(self, delivery: Delivery) -> str:
        """The receiver `delivery` goes to: its URL's origin, as the outbox tells them apart."""
        return origin(delivery.address)

    async def deliver(self, item: Item, delivery: Delivery) -> DeliveryRef | None:
        # Nothing to say yet: the decision comes as the update (the outbox marks the copy
        # for one at once when the item was decided before this).
        return None

    async def update(self, item: Item, delivery: Delivery) -> None:
        if item.status is ItemStatus.PENDING:
            return
        request = await self.store.request_of_item(item.id)
        if request is None:
            raise DeliveryError(f"item {item.id} is not a request's", permanent=True)
        secret = self.secret_for(request.skill)
        if not secret:
            raise DeliveryError(
                f"skill {request.skill!r} has no callback secret (callback_secret_env)",
                permanent=True,
            )
        state = state_of(request, item, base_url=self.base_url)
        body = wire_state(state).model_dump_json().encode("utf-8")
        stamp = str(int(self._clock()))
        headers = {
            "Content-Type": "application/json",
            TIMESTAMP_HEADER: stamp,
            SIGNATURE_HEADER: sign(secret, stamp, body, key=request.id),
            IDEMPOTENCY_HEADER: request.id,
        }
        # Imported with the first callback: httpx loads its command line's libraries (rich,
        # pygments, click: ~8 MiB, 0.15 s) that a server no agent asks a callback of need not carry.
        import httpx

        if self._http is None:
            self._http = httpx.AsyncClient(timeout=self._timeout, follow_redirects=False)
        try:
            # Streamed, so that leaving the block closes the connection with the body unread.
            async with self._http.stream(
                "POST", delivery.address, content=body, headers=headers
            ) as response:
                status = response.status_code
                wait = retry_after_seconds(response.headers.get("retry-after"), now=self._clock())
        except httpx.HTTPError as exc:
            raise DeliveryError(f"callback failed: {type(exc).__name__}: {exc}") from None
        if 200 <= status < 300:
            return
        raise DeliveryError(
            f"callback answered {status}",
            retry_after=wait,
            permanent=not (status in _RETRIED or status >= 500),
        )

    async def aclose(self) -> None:
        if self._http is not None:
            await self._http.aclose()
