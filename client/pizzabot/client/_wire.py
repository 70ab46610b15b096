"""What the client says to the server and how it reads the answers, with no I/O of its own.

`AsyncInbox` and `Inbox` differ only in how they send a request and sleep; everything else
(the request bodies, the Idempotency-Key, which failures are worth another try, how a long
poll is cut into server-sized waits, what an error says) lives here once, so the two stay the
same client.

    InboxError            every failure: status (None: the server was not reached) + detail
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx
from pydantic import ValidationError

from pizzabot.client.wire import MAX_TITLE, RequestBody, RequestState

__all__ = [
    "MAX_TITLE",
    "MAX_WAIT",
    "Call",
    "InboxError",
    "Retry",
    "approval_body",
    "expiry_wait",
    "get_call",
    "new_key",
    "post_call",
    "question_body",
    "refused",
    "state_from",
    "transient",
    "unreachable",
    "worth_waiting",
]

#: The longest single wait the server holds a GET for (`?wait=` is 0..60).
MAX_WAIT = 60.0
#: Answers the server could give after the request took effect, or before: asking again with
#: the same Idempotency-Key is safe for a POST and harmless for a GET.
_TRANSIENT_STATUS = frozenset({429, 502, 503, 504})
#: The most of an answer kept in an error (a proxy's HTML page is not worth more).
_DETAIL_CHARS = 300


class InboxError(Exception):
    """The server refused a request (`status`, its `detail`), or could not be reached
    (`status` None, `detail` the reason)."""

    def __init__(self, message: str, *, status: int | None = None, detail: Any = None) -> None:
        super().__init__(message)
        self.status = status
        self.detail = detail


@dataclass(frozen=True)
class Call:
    """One HTTP request to make, and how long to give it."""

    method: str
    path: str
    timeout: float
    json: dict[str, Any] | None = None
    params: dict[str, str] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Retry:
    """How often a request is tried again after a transient failure, and the pauses between
    (doubling from `first`, at most `longest`)."""

    attempts: int = 4
    first: float = 0.5
    longest: float = 8.0

    def pause(self, attempt: int) -> float:
        return float(min(self.longest, self.first * 2**attempt))


def new_key() -> str:
    """A fresh Idempotency-Key: one per request, reused by each try of it."""
    return f"pzb-{uuid.uuid4().hex}"


def approval_body(
    skill: str,
    *,
    title: str,
    tool: str,
    args: Mapping[str, Any],
    schema: Mapping[str, Any] | None,
    risk: Mapping[str, Any] | None,
    description: str | None,
    timeout: float | None,
    callback_url: str | None,
    preview: str | None = None,
) -> RequestBody:
    return _body(
        skill=skill,
        title=title,
        tool=tool,
        preview=preview,
        args=dict(args),
        schema=dict(schema) if schema is not None else None,
        risk=dict(risk) if risk is not None else None,
        description=description,
        timeout=timeout,
        callback_url=callback_url,
    )


def question_body(
    skill: str,
    *,
    question: str,
    title: str | None,
    schema: Mapping[str, Any] | None,
    timeout: float | None,
) -> RequestBody:
    first_line = question.strip().splitlines()[0] if question.strip() else "Question"
    return _body(
        skill=skill,
        title=title or (first_line[:77] + "…" if len(first_line) > 78 else first_line),
        question=question,
        schema=dict(schema) if schema is not None else None,
        timeout=timeout,
    )


def _body(**fields: Any) -> RequestBody:
    """The request, checked here as the server checks it: a bad one is told at once."""
    try:
        return RequestBody.model_validate(fields)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "request"
        raise InboxError(f"{where}: {first['msg']}", detail=exc.errors()) from None


def post_call(body: RequestBody, key: str, *, timeout: float) -> Call:
    headers = {"Idempotency-Key": key}
    return Call("POST", "/api/requests", timeout, json=body.json_body(), headers=headers)


def _checked(request_id: str) -> str:
    if not request_id or "/" in request_id or request_id in {".", ".."}:
        raise InboxError(f"not a request id: {request_id!r}")
    return request_id


def cancel_call(request_id: str, *, timeout: float) -> Call:
    return Call("POST", f"/api/requests/{_checked(request_id)}/cancel", timeout)


def get_call(request_id: str, wait: float, *, timeout: float) -> Call:
    _checked(request_id)
    if not math.isfinite(wait) or wait < 0:
        raise InboxError(f"wait must be a number of seconds >= 0 (got {wait!r})")
    wait = min(wait, MAX_WAIT)
    params = {"wait": f"{wait:g}"} if wait > 0 else {}
    # The server holds the answer up to `wait`; the connection must outlive that.
    return Call("GET", f"/api/requests/{request_id}", timeout + wait, params=params)


def expiry_wait(timeout: float | None) -> float | None:
    """How long `ask` waits for a request whose item expires after `timeout` seconds: a
    little longer, so the server's "expired" arrives rather than a pending request."""
    return None if timeout is None else timeout + 30.0


def transient(response: httpx.Response | None, error: httpx.HTTPError | None) -> bool:
    """Whether the same request is worth another try: the server was not reached, the
    connection dropped, or a proxy or the server said "not now"."""
    if error is not None:
        return isinstance(error, httpx.TransportError)
    return response is not None and response.status_code in _TRANSIENT_STATUS


class _Unreachable(InboxError):
    """The server was not reached (an InboxError with no status, like bad input has)."""


def worth_waiting(error: InboxError) -> bool:
    """Whether a failed poll of a request that exists should be tried again: the server was
    away or said "not now" (it keeps the request meanwhile)."""
    return isinstance(error, _Unreachable) or error.status in _TRANSIENT_STATUS


def unreachable(url: str, error: httpx.HTTPError) -> InboxError:
    reason = str(error) or type(error).__name__
    return _Unreachable(f"cannot reach the inbox at {url}: {reason}", detail=reason)


def refused(response: httpx.Response) -> InboxError:
    """The server's `{"detail": ...}` (or the first words of whatever else it sent)."""
    try:
        body = response.json()
    except ValueError:
        body = None
    detail = body.get("detail") if isinstance(body, dict) else None
    if detail is None:
        text = " ".join(response.text.split())
        detail = text[:_DETAIL_CHARS] or response.reason_phrase
    shown = detail if isinstance(detail, str) else repr(detail)[:_DETAIL_CHARS]
    return InboxError(
        f"{response.status_code}: {shown}", status=response.status_code, detail=detail
    )


def state_from(response: httpx.Response) -> RequestState:
    """The request's state from a 2xx answer; `created` when the POST made it (201)."""
    try:
        body = response.json()
    except ValueError:
        raise InboxError(
            f"{response.status_code}: the answer is not JSON (is the URL a Pizza Bot server?)",
            status=response.status_code,
        ) from None
    if not isinstance(body, dict):
        raise InboxError("the answer is not a JSON object", status=response.status_code)
    try:
        state = RequestState.model_validate(body)
    except ValidationError as exc:
        raise InboxError(
            f"the server's answer is not a request: {exc.errors()[0]['msg']}",
            status=response.status_code,
            detail=body,
        ) from None
    return state.model_copy(update={"created": response.status_code == 201})
