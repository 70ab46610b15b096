"""The agents of `pizzabot bench --compare awaithumans`: the same request path timed against
either server, each through its own client library.

Run as a script (`python hitl_agent.py CONFIG_JSON`) by the Python of the side it speaks for:
the bench's own for Pizza Bot (its client, `pizzabot.client`), the bench's awaithumans
virtualenv for awaithumans (its SDK, `awaithumans`). It imports nothing else of Pizza Bot, so the
same file runs in both.

1. `crowd` agents ask for a decision and wait on it as each library waits (Pizza Bot:
   `AsyncInbox.request` then `until_decided`, a long-poll asked again each time one ends
   pending; awaithumans: `await_human()`, which creates its task and long-polls
   `/api/tasks/{id}/poll`);
2. before the crowd and once it waits, it prints `{"phase": "warm"}`, then `{"phase":
   "parked"}`, and waits for a line on stdin each time (the bench reads the server's memory);
3. one at a time, `samples` more agents: the request sent → answered (the card made), then the
   agent waits through its library, then the decision POST (an approver's click) → the agent
   resumed with the decision;
4. it prints its figures as one JSON line.
"""

from __future__ import annotations

import asyncio
import json
import math
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

#: Requests made at once while the crowd is built.
AT_ONCE = 50
#: Time for a waiting agent's long-poll to reach the server before the decision is sent, so the
#: figure is decision → resumed, not a race with the agent's first poll.
SETTLE_S = 0.3


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[max(1, math.ceil(len(ordered) * p / 100)) - 1]


def _client(base: str, token: str, room: int) -> Any:
    """An HTTP client with `room` connections. A client's pool does work in proportion to its
    connections for every request that starts or ends, so the crowd's agents share a client
    per `AT_ONCE` (one for all of them would make the bench's own process the bottleneck when
    their long-polls end together). An idle connection is dropped well before the server's
    keep-alive time-out (5 s) closes it, so no request goes out on a closing one."""
    import httpx

    limits = httpx.Limits(
        max_connections=room, max_keepalive_connections=room, keepalive_expiry=1.0
    )
    auth = {"Authorization": f"Bearer {token}"}
    return httpx.AsyncClient(base_url=base, headers=auth, limits=limits, timeout=700)


class PizzaBot:
    """Pizza Bot's requests API through its client library."""

    def __init__(self, base: str, token: str, crowd: int) -> None:

        from pizzabot.client import AsyncInbox

        self.http = _client(base, token, 10)
        self.inbox = AsyncInbox(base, token, http=self.http, timeout=700)
        self.crowd = [
            AsyncInbox(base, token, http=_client(base, token, AT_ONCE), timeout=700)
            for _ in range(0, crowd, AT_ONCE)
        ]

    async def create(self, tag: str) -> tuple[str, str]:
        """(what the agent waits on, what the approver decides)."""
        state = await self.inbox.request(
            "bench-requests", title=tag, tool="bench.deploy", args={"k": tag}
        )
        return state.id, state.item_id

    async def wait(self, tag: str, key: str) -> Any:
        state = await self.inbox.until_decided(key)
        if state.pending:
            raise RuntimeError(f"{tag}: the wait ended without a decision")
        return state.status

    async def decide(self, card: str) -> None:
        r = await self.http.post(f"/api/items/{card}/decision", json={"decision": "approve"})
        r.raise_for_status()

    async def crowd_agent(self, k: int, made: list[int]) -> Any:
        inbox = self.crowd[k // AT_ONCE]
        tag = f"crowd-{k}"
        state = await inbox.request(
            "bench-requests", title=tag, tool="bench.deploy", args={"k": tag}
        )
        made.append(k)
        return await inbox.until_decided(state.id)


class AwaitHumans:
    """awaithumans's server through its SDK: `await_human()` for an agent that waits."""

    def __init__(self, base: str, token: str, crowd: int) -> None:
        from pydantic import BaseModel

        class Deploy(BaseModel):
            k: str

        class Decision(BaseModel):
            approved: bool

        self.payload_schema, self.response_schema = Deploy, Decision
        self.base, self.token = base, token
        self.http = _client(base, token, 10)

    def _call(self, tag: str) -> Awaitable[Any]:
        from awaithumans import await_human

        return await_human(  # type: ignore[no-any-return]
            task=tag,
            payload_schema=self.payload_schema,
            payload=self.payload_schema(k=tag),
            response_schema=self.response_schema,
            timeout_seconds=3600,
            idempotency_key=f"bench-{tag}",
            server_url=self.base,
            api_key=self.token,
        )

    async def create(self, tag: str) -> tuple[str, str]:
        """The task as `await_human()` creates it (the same body, the same key); the agent's
        `await_human()` below finds it by its key and waits on it."""
        from awaithumans.forms import extract_form

        body = {
            "task": tag,
            "payload": {"k": tag},
            "payload_schema": self.payload_schema.model_json_schema(),
            "response_schema": self.response_schema.model_json_schema(),
            "form_definition": extract_form(self.response_schema).model_dump(mode="json"),
            "timeout_seconds": 3600,
            "idempotency_key": f"bench-{tag}",
        }
        r = await self.http.post("/api/tasks", json=body)
        r.raise_for_status()
        task_id = str(r.json()["id"])
        return task_id, task_id

    async def wait(self, tag: str, key: str) -> Any:
        decision = await self._call(tag)
        if not decision.approved:
            raise RuntimeError(f"{tag}: resumed without the approval")
        return "approved"

    async def decide(self, card: str) -> None:
        r = await self.http.post(
            f"/api/tasks/{card}/complete", json={"response": {"approved": True}}
        )
        r.raise_for_status()

    async def crowd_agent(self, k: int, made: list[int]) -> Any:
        # Made first, so the bench knows when the whole crowd exists; `await_human()` finds
        # it by its key and waits on it (the SDK makes a client of its own for each call).
        await self.create(f"crowd-{k}")
        made.append(k)
        return await self._call(f"crowd-{k}")


async def _crowd(side: PizzaBot | AwaitHumans, n: int) -> list[asyncio.Task[Any]]:
    """`n` agents, `AT_ONCE` asking at a time; returns once every one's request exists (or
    its agent failed), so no timed request meets the crowd being made."""
    agents: list[asyncio.Task[Any]] = []
    made: list[int] = []
    for start in range(0, n, AT_ONCE):
        agents += [
            asyncio.create_task(side.crowd_agent(k, made))
            for k in range(start, min(n, start + AT_ONCE))
        ]
        while len(made) + sum(a.done() for a in agents) < len(agents):
            await asyncio.sleep(0.01)
    return agents


async def _one(side: PizzaBot | AwaitHumans, tag: str) -> tuple[float, float, float]:
    """(request sent → answered, decision POST answered, decision sent → agent resumed), ms."""
    began = time.perf_counter()
    key, card = await side.create(tag)
    made = time.perf_counter()
    agent = asyncio.create_task(side.wait(tag, key))
    await asyncio.sleep(SETTLE_S)
    if agent.done():
        agent.result()
        raise RuntimeError(f"{tag}: the agent stopped waiting before the decision")
    decided = time.perf_counter()
    await side.decide(card)
    answered = time.perf_counter()
    await agent
    resumed = time.perf_counter()
    return (made - began) * 1000, (answered - decided) * 1000, (resumed - decided) * 1000


async def main(config: dict[str, Any], ready: Callable[[str], Awaitable[None]]) -> dict[str, Any]:
    make = PizzaBot if config["side"] == "pizzabot" else AwaitHumans
    side = make(config["base"], config["token"], config["crowd"])
    await _one(side, "warm-up")  # not timed: the first request warms both sides' paths
    await ready("warm")
    print(f"crowd from {time.monotonic():.1f}", file=sys.stderr, flush=True)
    crowd = await _crowd(side, config["crowd"])
    print(f"crowd made at {time.monotonic():.1f}", file=sys.stderr, flush=True)
    await asyncio.sleep(2.0)  # every crowd agent's wait reached the server
    failed = [t for t in crowd if t.done()]
    await ready("parked")
    timed: list[tuple[float, float, float]] = []
    refused: list[str] = []
    for k in range(config["samples"]):
        try:
            timed.append(await _one(side, f"timed-{k}"))
        except Exception as exc:
            # Counted and said, not timed: one refused request must not hide the others.
            refused.append(repr(exc)[:300])
            continue
        print(f"sample {k} at {time.monotonic():.1f}: {timed[-1]}", file=sys.stderr, flush=True)
    if not timed:
        raise RuntimeError(f"every timed request failed: {refused[:3]}")
    failed += [t for t in crowd if t.done() and t not in failed]
    for t in crowd:
        t.cancel()
    await asyncio.gather(*crowd, return_exceptions=True)
    errors = sorted({repr(t.exception())[:300] for t in failed if not t.cancelled()})
    return {
        "waiting": config["crowd"],
        "samples": len(timed),
        "samples_failed": len(refused),
        "samples_errors": sorted(set(refused))[:5],
        "create_p50_ms": percentile([t[0] for t in timed], 50),
        "create_p99_ms": percentile([t[0] for t in timed], 99),
        "decision_post_p50_ms": percentile([t[1] for t in timed], 50),
        "resume_p50_ms": percentile([t[2] for t in timed], 50),
        "resume_p99_ms": percentile([t[2] for t in timed], 99),
        "crowd_failed": len(failed),
        "crowd_errors": errors[:5],
    }


async def _ready_line(phase: str) -> None:
    print(json.dumps({"phase": phase}), flush=True)
    await asyncio.to_thread(sys.stdin.readline)


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(json.loads(sys.argv[1]), _ready_line))), flush=True)
