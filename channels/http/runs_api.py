"""Runs under /api/runs: start one, list them, read one with its trace, cancel it, send it a
follow-up, and approve every call of its waiting turn at once.

    POST /api/runs                  {skill, input} → 201 the run
    GET  /api/runs                  {"items": [run]}, newest first (?limit=)
    GET  /api/runs/{id}             the run with its events
    POST /api/runs/{id}/cancel      the run, cancelled (409 if it already ended)
    POST /api/runs/{id}/messages    {text}: a finished run continues with its history
    GET  /api/runs/{id}/decisions   the run's waiting turn: its calls (each with its card's
                                    `digest`) and `digest`, one digest of them all
    POST /api/runs/{id}/decisions   {"decision": "approve", "all": true, "seen": ...}: each
                                    pending call of the run's latest model turn approved on its
                                    own (`pizzabot.agent.batch.approve_all`), each result saying
                                    whether it was, or why it was left out

`seen` binds the approval to what the caller saw: {item id: digest} (a call left out of it, or
whose card changed, is left out, "this card changed"), or the turn's one `digest` (when it no
longer matches, every call is left out). Without it, the calls are approved as read here.
"""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Query
from pydantic import BaseModel, Field

from pizzabot.agent.batch import approve_all, batch_digest, turn_items
from pizzabot.agent.policy.principal import Principal
from pizzabot.channels.http import schema as out
from pizzabot.channels.http.answers import item_out, run_detail, run_out
from pizzabot.channels.http.bodies import BoundedJsonRoute
from pizzabot.channels.http.deps import Deps
from pizzabot.channels.http.schema import errors
from pizzabot.channels.http.scopes import ADMIN, DECIDING, caller

__all__ = ["router"]

router = APIRouter(
    prefix="/api/runs",
    route_class=BoundedJsonRoute,
    dependencies=[Depends(caller)],
    responses=errors(401, 403, 422),
)
WITH_BODY = errors(400, 408, 413)


class StartRun(BaseModel):
    skill: str
    input: str = ""


class MessageIn(BaseModel):
    text: str = Field(min_length=1)


#: A card's digest (`pizzabot.agent.card_digest`), as an item's `digest` gives it.
Digest = Annotated[str, Field(max_length=64, pattern=r"^[0-9a-fA-F]+$")]

ItemId = Annotated[str, Field(max_length=64)]


class BatchIn(BaseModel):
    #: Only approving is done in a batch: an edit or a rejection is about one call.
    decision: Literal["approve"]
    #: Every call of the run's waiting turn (the one batch there is).
    all: Literal[True]
    #: What the caller saw: each call's digest by item id, or the turn's one digest.
    seen: Annotated[dict[ItemId, Digest], Field(max_length=200)] | Digest | None = None


class TurnOut(BaseModel):
    run_id: str
    #: The waiting calls, in the order the model asked, each with its card's `digest`.
    items: list[out.ItemOut]
    #: One digest of all their cards: a `seen` for the lot.
    digest: str


class BatchResultOut(BaseModel):
    item: out.ItemOut
    approved: bool
    #: Why it was left out (it needs more approvers, it was decided meanwhile); None when
    #: approved.
    why: str | None


class BatchOut(BaseModel):
    run_id: str
    #: In words: what was approved, what was left out and why.
    summary: str
    results: list[BatchResultOut]


@router.post(
    "", status_code=201, response_model=out.RunOut, responses={**WITH_BODY, **errors(404, 409)}
)
async def start_run(body: StartRun, deps: Deps, who: Principal = DECIDING) -> out.RunOut:
    return run_out(await deps.runs.start(body.skill, body.input, by=who))


@router.get("", response_model=out.RunList, dependencies=[DECIDING])
async def list_runs(deps: Deps, limit: int = Query(100, ge=1, le=1000)) -> out.RunList:
    return out.RunList(items=[run_out(r) for r in await deps.store.list_runs(limit=limit)])


@router.get(
    "/{run_id}", response_model=out.RunDetail, responses=errors(404), dependencies=[DECIDING]
)
async def get_run(run_id: str, deps: Deps) -> out.RunDetail:
    run = await deps.store.get_run(run_id)
    return run_detail(run, await deps.store.events(run_id))


@router.post("/{run_id}/cancel", response_model=out.RunOut, responses=errors(404, 409))
async def cancel_run(run_id: str, deps: Deps, who: Principal = ADMIN) -> out.RunOut:
    return run_out(await deps.runs.cancel(run_id, by=who))


@router.post(
    "/{run_id}/messages",
    response_model=out.RunOut,
    responses={**WITH_BODY, **errors(404, 409)},
)
async def follow_up(
    run_id: str, body: MessageIn, deps: Deps, who: Principal = DECIDING
) -> out.RunOut:
    return run_out(await deps.runs.follow_up(run_id, body.text, by=who))


@router.get(
    "/{run_id}/decisions", response_model=TurnOut, responses=errors(404), dependencies=[DECIDING]
)
async def waiting_turn(run_id: str, deps: Deps) -> TurnOut:
    await deps.store.get_run(run_id)  # 404 for a run that does not exist
    items = await turn_items(deps.store, run_id)
    return TurnOut(run_id=run_id, items=[item_out(i) for i in items], digest=batch_digest(items))


@router.post(
    "/{run_id}/decisions",
    response_model=BatchOut,
    responses={**WITH_BODY, **errors(404)},
)
async def decide_all(run_id: str, body: BatchIn, deps: Deps, who: Principal = DECIDING) -> BatchOut:
    await deps.store.get_run(run_id)  # 404 for a run that does not exist
    batch = await approve_all(deps.inbox, run_id, by=who, seen=body.seen)
    return BatchOut(
        run_id=run_id,
        summary=batch.summary(),
        results=[
            BatchResultOut(item=item_out(o.item), approved=o.approved, why=o.why)
            for o in batch.outcomes
        ],
    )
