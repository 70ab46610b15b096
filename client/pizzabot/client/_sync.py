"""The synchronous client of a Pizza Bot server's requests API, for scripts and hooks.

    with Inbox("http://127.0.0.1:8787", token) as inbox:
        decision = inbox.ask("deploys", tool="deploy", args={"env": "prod"})
        if decision.approved:
            deploy(**decision.args)

A request is created once: its Idempotency-Key is made before the first try and sent again
with every retry, so a dropped connection never makes a second item. Waiting is a long poll
(`GET ?wait=`), asked again until the request is decided or the caller's time is up.

It is `AsyncInbox` with blocking I/O: the bodies, keys, retries and answers are
`pizzabot.client._wire`'s, shared by both, so only the sending and the sleeping are written twice.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Any

import httpx

from pizzabot.client import _wire
from pizzabot.client._wire import Call, InboxError, Retry
from pizzabot.client.wire import MAX_TITLE, RequestBody, RequestState

__all__ = ["Inbox"]


class Inbox:
    """One server and its API token. `http` lends a client of your own (left open)."""

    def __init__(
        self,
        url: str,
        token: str,
        *,
        http: httpx.Client | None = None,
        timeout: float = 30.0,
        retry: Retry = Retry(),
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not url.startswith(("http://", "https://")):
            raise InboxError(f"the inbox URL must start with http:// or https:// (got {url!r})")
        if not token:
            raise InboxError("no API token")
        self.url = url.rstrip("/")
        self._headers = {"Authorization": f"Bearer {token}"}
        self._http = http or httpx.Client()
        self._own_http = http is None
        self._timeout = timeout
        self._retry = retry
        self._sleep = sleep
        self._clock = clock

    def __enter__(self) -> Inbox:
        return self

    def __exit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        if self._own_http:
            self._http.close()

    def _send(self, call: Call) -> httpx.Response:
        """The answer to `call`, tried again (same body, same key) after a transient failure."""
        for attempt in range(self._retry.attempts):
            response: httpx.Response | None = None
            error: httpx.HTTPError | None = None
            try:
                response = self._http.request(
                    call.method,
                    self.url + call.path,
                    json=call.json,
                    params=call.params,
                    headers={**self._headers, **call.headers},
                    timeout=call.timeout,
                )
            except httpx.HTTPError as exc:
                error = exc
            last = attempt == self._retry.attempts - 1
            if not last and _wire.transient(response, error):
                self._sleep(self._retry.pause(attempt))
                continue
            if error is not None:
                raise _wire.unreachable(self.url, error) from None
            assert response is not None
            if response.status_code >= 400:
                raise _wire.refused(response)
            return response
        raise AssertionError("unreachable: the last attempt returns or raises")

    def file(self, body: RequestBody, *, idempotency_key: str | None = None) -> RequestState:
        """File a request as built (`pizzabot.client.wire.RequestBody`); returns at once. The
        same `idempotency_key` with the same body finds the request made before."""
        call = _wire.post_call(body, idempotency_key or _wire.new_key(), timeout=self._timeout)
        return _wire.state_from(self._send(call))

    def request(
        self,
        skill: str,
        *,
        title: str,
        tool: str,
        args: Mapping[str, Any],
        schema: Mapping[str, Any] | None = None,
        risk: Mapping[str, Any] | None = None,
        description: str | None = None,
        timeout: float | None = None,
        callback_url: str | None = None,
        idempotency_key: str | None = None,
        preview: str | None = None,
    ) -> RequestState:
        """Ask for approval of a tool call; returns at once (usually pending). `preview`: what
        the call would do, in your words (a dry run's output, a diff), shown on the card as
        yours."""
        body = _wire.approval_body(
            skill,
            title=title,
            tool=tool,
            args=args,
            schema=schema,
            risk=risk,
            description=description,
            timeout=timeout,
            callback_url=callback_url,
            preview=preview,
        )
        return self.file(body, idempotency_key=idempotency_key)

    def question(
        self,
        skill: str,
        *,
        question: str,
        title: str | None = None,
        schema: Mapping[str, Any] | None = None,
        timeout: float | None = None,
        idempotency_key: str | None = None,
    ) -> RequestState:
        """Ask a person a question (a form from `schema`, or a text answer); returns at once."""
        body = _wire.question_body(
            skill, question=question, title=title, schema=schema, timeout=timeout
        )
        return self.file(body, idempotency_key=idempotency_key)

    def get(self, request_id: str, *, wait: float = 0) -> RequestState:
        """The request now, or (with `wait`, at most 60 s) as soon as it is decided."""
        call = _wire.get_call(request_id, wait, timeout=self._timeout)
        return _wire.state_from(self._send(call))

    def cancel(self, request_id: str) -> RequestState:
        """Withdraw the request while it is pending (its cards say so); one decided first
        keeps its decision. Returns its state either way."""
        call = _wire.cancel_call(request_id, timeout=self._timeout)
        return _wire.state_from(self._send(call))

    def until_decided(self, request_id: str, *, timeout: float | None = None) -> RequestState:
        """Wait until the request is decided; after `timeout` seconds, the pending request.

        A server that is away for a while (a restart, a deploy) is asked again until then:
        the request lives on the server, so waiting can go on where it left off."""
        deadline = None if timeout is None else self._clock() + timeout
        away = 0
        while True:
            left = _wire.MAX_WAIT if deadline is None else deadline - self._clock()
            try:
                decision = self.get(request_id, wait=max(0.0, min(left, _wire.MAX_WAIT)))
            except InboxError as exc:
                over = deadline is not None and self._clock() >= deadline
                if over or not _wire.worth_waiting(exc):
                    raise
                self._sleep(self._retry.pause(away))
                away += 1
                continue
            away = 0
            if not decision.pending or (deadline is not None and self._clock() >= deadline):
                return decision

    def ask(
        self,
        skill: str,
        *,
        tool: str,
        args: Mapping[str, Any],
        title: str | None = None,
        schema: Mapping[str, Any] | None = None,
        risk: Mapping[str, Any] | None = None,
        description: str | None = None,
        timeout: float | None = None,
        callback_url: str | None = None,
        idempotency_key: str | None = None,
        preview: str | None = None,
    ) -> RequestState:
        """Request approval and wait for the decision. With `timeout` the item expires on the
        server after that many seconds, and `ask` returns the expired request."""
        created = self.request(
            skill,
            title=title or tool[:MAX_TITLE],
            tool=tool,
            args=args,
            schema=schema,
            risk=risk,
            description=description,
            timeout=timeout,
            callback_url=callback_url,
            idempotency_key=idempotency_key,
            preview=preview,
        )
        if not created.pending:
            return created
        return self.until_decided(created.id, timeout=_wire.expiry_wait(timeout))
