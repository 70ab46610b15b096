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


class PizzaBot:
    """Pizza Bot's requests API through its client library."""

    def __init__(self, base: str, token: str, crowd: int) -> None:
        import httpx

        from pizzabot.client import AsyncInbox

        limits = httpx.Limits(max_connections=crowd + 50, max_keepalive_connections=crowd + 50)
        self.http = httpx.AsyncClient(
            base_url=base, headers={"Authorization": f"Bearer {token}"}, limits=limits, timeout=700
        )
        self.inbox = AsyncInbox(base, token, http=self.http, timeout=700)

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

    async def crowd_agent(self, tag: str) -> Any:
        key, _ = await self.create(tag)
        return await self.wait(tag, key)


class AwaitHumans:
    """awaithumans's server through its SDK: `await_human()` for an agent that waits."""

    def __init__(self, base: str, token: str, crowd: int) -> None:
        import httpx
        from pydantic import BaseModel

        class Deploy(BaseModel):
            k: str

        class Decision(BaseModel):
            approved: bool

        self.payload_schema, self.response_schema = Deploy, Decision
        self.base, self.token = base, token
        limits = httpx.Limits(max_connections=crowd + 50, max_keepalive_connections=crowd + 50)
        self.http = httpx.AsyncClient(
            base_url=base, headers={"Authorization": f"Bearer {token}"}, limits=limits, timeout=700
        )

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

    async def crowd_agent(self, tag: str) -> Any:
        return await self._call(tag)


async def _crowd(side: PizzaBot | AwaitHumans, n: int) -> list[asyncio.Task[Any]]:
    agents: list[asyncio.Task[Any]] = []
    for start in range(0, n, AT_ONCE):
        batch = [
            asyncio.create_task(side.crowd_agent(f"crowd-{k}"))
            for k in range(start, min(n, start + AT_ONCE))
        ]
        agents += batch
        await asyncio.sleep(0.2)  # the batch's requests made before the next one's
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
    crowd = await _crowd(side, config["crowd"])
    await asyncio.sleep(2.0)  # every crowd agent's wait reached the server
    failed = [t for t in crowd if t.done()]
    await ready("parked")
    timed = [await _one(side, f"timed-{k}") for k in range(config["samples"])]
    failed += [t for t in crowd if t.done() and t not in failed]
    for t in crowd:
        t.cancel()
    await asyncio.gather(*crowd, return_exceptions=True)
    errors = sorted({repr(t.exception())[:300] for t in failed if not t.cancelled()})
    return {
        "waiting": config["crowd"],
        "samples": len(timed),
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
