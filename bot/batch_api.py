"""Approve all through the API (bearer token), for the CLI and scripts.

    POST /api/runs/{id}/decisions   {"decision": "approve", "all": true}
        → {"run_id", "summary", "results": [{"item", "approved", "why"}]}

Every pending call of the run's latest model turn is approved on its own
(`agent.batch.approve_all`), and each result says whether it was, or why it was left out (it
needs more than one approval; it was decided meanwhile). An unknown run is a 404; a run with
nothing waiting answers with no results.
"""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel

from agent.batch import approve_all
from agent.policy.principal import Principal
from bot import api_schema as out
from bot.api import DECIDING, BoundedJsonRoute, caller, item_json, services
from bot.api_schema import errors


class BatchIn(BaseModel):
    #: Only approving is done in a batch: an edit or a rejection is about one call.
    decision: Literal["approve"]
    #: Every call of the run's waiting turn (the one batch there is).
    all: Literal[True]


class BatchResultOut(BaseModel):
    item: out.ItemOut
    approved: bool
    #: Why it was left out; None when approved.
    why: str | None


class BatchOut(BaseModel):
    run_id: str
    #: In words: what was approved, what was left out and why.
    summary: str
    results: list[BatchResultOut]


def router() -> APIRouter:
    api = APIRouter(
        prefix="/api",
        route_class=BoundedJsonRoute,
        dependencies=[Depends(caller)],
        responses=errors(401, 422),
    )

    @api.post(
        "/runs/{run_id}/decisions",
        response_model=BatchOut,
        responses=errors(400, 404, 408, 413),
    )
    async def decide_all(
        run_id: str, body: BatchIn, request: Request, who: Principal = DECIDING
    ) -> dict[str, Any]:
        svc = services(request)
        await svc.store.get_run(run_id)  # 404 for a run that does not exist
        batch = await approve_all(svc.inbox, run_id, by=who)
        return {
            "run_id": run_id,
            "summary": batch.summary(),
            "results": [
                {"item": item_json(o.item), "approved": o.approved, "why": o.why}
                for o in batch.outcomes
            ],
        }

    return api
