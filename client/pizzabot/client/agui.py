"""An AG-UI agent's interrupts, decided in the inbox.

AG-UI (the Agent–User Interaction protocol) has no channel back into a running run: a run that
needs a person ends with `RUN_FINISHED` whose outcome is `interrupt`, listing what it waits
for, and the next run on the same thread carries one `ResumeEntry` per interrupt. `run`
plays the consumer: it posts a `RunAgentInput`, reads the run's events (SSE), and when the run
is interrupted asks Pizza Bot about every interrupt at once, waits for the decisions, and
starts the resuming run — until a run finishes without one.

| interrupt | the card | resume entry |
| --- | --- | --- |
| names a tool call the run streamed (`toolCallId`) | an approval of that call (its name and arguments) | approved or edited: `resolved`, `{"approved": true, "args": …}`; rejected: `resolved`, `{"approved": false, "reason": …}` |
| anything else | a question: `message` (else `reason`), a form from `responseSchema` | answered: `resolved`, the answer (a text answer as a string) |
| no decision in time (the card waits `timeout` seconds, and never past the interrupt's `expiresAt`), declined, or halted by the kill switch | | `cancelled` |

Each card's idempotency key is the thread, run and interrupt ids, so a consumer that restarts
and asks again finds the same cards. A run's stream is read with limits: `max_event_bytes`
per event, `max_events` per run. Needs the `agui` extra (`pip install
'pizzabot-client[agui]'`).
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import httpx

if TYPE_CHECKING:
    from ag_ui.core import Interrupt, ResumeEntry, RunAgentInput, RunFinishedEvent

    from pizzabot.client import AsyncInbox, RequestState

__all__ = ["AgUiError", "Finished", "run"]

MAX_EVENT_BYTES = 256 * 1024
MAX_EVENTS = 10_000


class AgUiError(Exception):
    """The agent's run failed (`RUN_ERROR`), or its stream broke the protocol or a limit."""


@dataclass
class Finished:
    """How the last run ended, and the runs it took (the first, then each resume)."""

    event: RunFinishedEvent
    runs: list[str]
    #: Each resume entry sent, in order.
    resumed: list[ResumeEntry] = field(default_factory=list)


@dataclass
class _Run:
    finished: RunFinishedEvent | None = None
    #: tool call id → (name, argument text as streamed)
    calls: dict[str, tuple[str, str]] = field(default_factory=dict)


async def _events(
    response: httpx.Response, *, max_event_bytes: int, max_events: int
) -> AsyncIterator[dict[str, Any]]:
    """The JSON of each SSE event's data, each event at most `max_event_bytes`."""
    buffer, data, size, count = b"", list[bytes](), 0, 0
    too_large = AgUiError(f"an event of the run is over {max_event_bytes} bytes")
    async for chunk in response.aiter_bytes():
        buffer += chunk
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            line = line.rstrip(b"\r")
            if line.startswith(b"data:"):
                data.append(line[5:].removeprefix(b" "))
                size += len(data[-1])
                if size > max_event_bytes:
                    raise too_large
            elif not line and data:
                count += 1
                if count > max_events:
                    raise AgUiError(f"the run sent more than {max_events} events")
                try:
                    event = json.loads(b"\n".join(data))
                except ValueError:
                    raise AgUiError("an event of the run is not JSON") from None
                if not isinstance(event, dict):
                    raise AgUiError("an event of the run is not a JSON object")
                yield event
                data, size = [], 0
        if len(buffer) + size > max_event_bytes:
            raise too_large


async def _one_run(
    http: httpx.AsyncClient, url: str, body: RunAgentInput, limits: tuple[int, int]
) -> _Run:
    from ag_ui.core import RunErrorEvent, RunFinishedEvent

    seen = _Run()
    payload = body.model_dump(mode="json", by_alias=True, exclude_none=True)
    headers = {"Accept": "text/event-stream"}
    async with http.stream("POST", url, json=payload, headers=headers) as response:
        if response.status_code != 200:
            raise AgUiError(f"the agent answered {response.status_code}")
        events = _events(response, max_event_bytes=limits[0], max_events=limits[1])
        async for event in events:
            kind = event.get("type")
            if kind == "TOOL_CALL_START":
                seen.calls[event["toolCallId"]] = (str(event["toolCallName"]), "")
            elif kind == "TOOL_CALL_ARGS" and event.get("toolCallId") in seen.calls:
                name, text = seen.calls[event["toolCallId"]]
                seen.calls[event["toolCallId"]] = (name, text + str(event["delta"]))
            elif kind == "RUN_ERROR":
                raise AgUiError(RunErrorEvent.model_validate(event).message)
            elif kind == "RUN_FINISHED":
                seen.finished = RunFinishedEvent.model_validate(event)
    if seen.finished is None:
        raise AgUiError("the run's stream ended without RUN_FINISHED")
    return seen


def _until(interrupt: Interrupt, timeout: float | None) -> float | None:
    """Seconds the card may wait: `timeout`, and no longer than the interrupt's `expiresAt`
    (ISO 8601; one that does not read as a date is left aside, as the spec allows)."""
    if not interrupt.expires_at:
        return timeout
    try:
        expires = datetime.fromisoformat(interrupt.expires_at)
    except ValueError:
        return timeout
    if expires.tzinfo is None:
        expires = expires.replace(tzinfo=UTC)
    left = max(1.0, (expires - datetime.now(UTC)).total_seconds())
    return left if timeout is None else min(timeout, left)


async def _ask(
    inbox: AsyncInbox,
    skill: str,
    interrupt: Interrupt,
    seen: _Run,
    key: str,
    timeout: float | None,
) -> RequestState:
    said = interrupt.message or interrupt.reason
    timeout = _until(interrupt, timeout)
    call = seen.calls.get(interrupt.tool_call_id or "")
    if call is not None:
        name, text = call
        try:
            args = json.loads(text) if text.strip() else {}
        except ValueError:
            args = {"arguments": text}
        asked = await inbox.request(
            skill,
            title=(interrupt.message or name)[:200],
            tool=name,
            args=args if isinstance(args, dict) else {"arguments": args},
            description=said[:4000],
            timeout=timeout,
            idempotency_key=key,
        )
    else:
        asked = await inbox.question(
            skill,
            question=said[:4000],
            title=said.splitlines()[0][:200] if said.strip() else interrupt.reason[:200],
            schema=interrupt.response_schema,
            timeout=timeout,
            idempotency_key=key,
        )
    return await inbox.until_decided(asked.id)


def _entry(interrupt: Interrupt, state: RequestState, *, tool: bool) -> ResumeEntry:
    from ag_ui.core import ResumeEntry

    if state.status in ("approved", "edited"):
        payload: Any = {"approved": True, "args": dict(state.args or {})}
    elif state.status == "rejected" and tool:
        payload = {"approved": False, "reason": state.reason or "rejected"}
    elif state.status == "answered":
        values = dict(state.args or {})
        payload = values["answer"] if interrupt.response_schema is None else values
    else:  # expired, declined, halted, or a question rejected
        return ResumeEntry(interrupt_id=interrupt.id, status="cancelled")
    return ResumeEntry(interrupt_id=interrupt.id, status="resolved", payload=payload)


async def run(
    inbox: AsyncInbox,
    skill: str,
    url: str,
    first: RunAgentInput,
    *,
    http: httpx.AsyncClient | None = None,
    timeout: float | None = None,
    max_resumes: int = 20,
    max_event_bytes: int = MAX_EVENT_BYTES,
    max_events: int = MAX_EVENTS,
) -> Finished:
    """Run the agent at `url` from `first`, deciding every interrupt in the inbox (`skill`),
    until a run finishes without one. `timeout`: seconds each card waits for a person."""
    own = http is None
    client = http or httpx.AsyncClient(timeout=httpx.Timeout(30, read=300))
    body, runs, resumed = first, [], []
    try:
        for _ in range(max_resumes + 1):
            runs.append(body.run_id)
            seen = await _one_run(client, url, body, (max_event_bytes, max_events))
            assert seen.finished is not None
            outcome = seen.finished.outcome
            if outcome is None or outcome.type != "interrupt":
                return Finished(event=seen.finished, runs=runs, resumed=resumed)
            key = f"agui:{body.thread_id}:{body.run_id}"
            states = await asyncio.gather(
                *(_ask(inbox, skill, i, seen, f"{key}:{i.id}", timeout) for i in outcome.interrupts)
            )
            entries = [
                _entry(i, s, tool=(i.tool_call_id or "") in seen.calls)
                for i, s in zip(outcome.interrupts, states, strict=True)
            ]
            resumed.extend(entries)
            body = body.model_copy(
                update={"run_id": uuid.uuid4().hex, "parent_run_id": None, "resume": entries}
            )
        raise AgUiError(f"the agent was still interrupted after {max_resumes} resumes")
    finally:
        if own:
            await client.aclose()
