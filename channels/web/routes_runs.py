"""Runs on the web inbox: the list, starting one, a run's timeline, cancelling, following up.

A run's page shows its timeline live (``/runs/{id}/live`` is its live region); a follow-up
message goes to a run that is not waiting on a decision.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.responses import HTMLResponse, Response

from pizzabot.agent.conversation import derive
from pizzabot.agent.errors import Conflict, KillSwitchOn, NotAllowed, NotFound
from pizzabot.agent.model import ItemStatus
from pizzabot.agent.timeline import entries
from pizzabot.channels.web._pages import error_page, fragment, go, live, not_found, page
from pizzabot.channels.web.deps import CHANNEL, Posted, SignedIn, SignedInLive, Visit

__all__ = ["router"]

#: Longest run input or follow-up message taken from a form, in characters.
MAX_TEXT = 20_000

router = APIRouter()


@router.get("/runs")
async def runs_list(v: SignedIn) -> Response:
    runs = await v.deps.store.list_runs(limit=200)
    return await page(v, "runs.html", section="runs", runs=runs)


@router.get("/runs/new")
async def new_run(v: SignedIn) -> Response:
    return await _new_run_page(v)


@router.post("/runs")
async def start_run(post: Posted) -> Response:
    v = post.visit
    skill, text = post.text("skill").strip(), post.text("input")[:MAX_TEXT]
    try:
        run = await v.deps.runs.start(skill, text, trigger=CHANNEL, by=v.by)
    except NotAllowed as exc:
        return await _new_run_page(v, error=str(exc), chosen=skill, text=text, status=403)
    except NotFound:
        return await _new_run_page(v, error="Pick one of the skills.", text=text, status=422)
    except KillSwitchOn as exc:
        return await _new_run_page(v, error=str(exc), chosen=skill, text=text, status=409)
    return go(v, f"/runs/{run.id}", "started")


@router.get("/runs/{run_id}")
async def run_get(run_id: str, v: SignedIn) -> Response:
    try:
        context = await _run_context(v, run_id)
    except NotFound:
        return await not_found(v, "run")
    return await page(v, "run.html", section="runs", **context)


@router.get("/runs/{run_id}/live")
async def run_live(run_id: str, v: SignedInLive) -> Response:
    try:
        await v.deps.store.get_run(run_id)
    except NotFound:
        return Response(status_code=404)

    async def make() -> str:
        return fragment(v, "_run_live.html", **await _run_context(v, run_id))

    return await live(v, make)


@router.post("/runs/{run_id}/cancel")
async def cancel(run_id: str, post: Posted) -> Response:
    v = post.visit
    try:
        await v.deps.runs.cancel(run_id, by=v.by)
    except NotAllowed as exc:
        return await error_page(v, 403, "Not allowed", str(exc))
    except NotFound:
        return await not_found(v, "run")
    except Conflict:
        return go(v, f"/runs/{run_id}", "ended")
    return go(v, f"/runs/{run_id}", "cancelled")


@router.post("/runs/{run_id}/messages")
async def follow_up(run_id: str, post: Posted) -> Response:
    v = post.visit
    text = post.text("text").strip()[:MAX_TEXT]
    if not text:
        return go(v, f"/runs/{run_id}", "empty")
    try:
        await v.deps.runs.follow_up(run_id, text, by=v.by)
    except NotAllowed as exc:
        return await error_page(v, 403, "Not allowed", str(exc))
    except NotFound:
        return await not_found(v, "run")
    except KillSwitchOn:
        return go(v, f"/runs/{run_id}", "kill")
    except Conflict:
        return go(v, f"/runs/{run_id}", "waiting")
    return go(v, f"/runs/{run_id}", "sent")


async def _new_run_page(
    v: Visit, *, error: str | None = None, chosen: str = "", text: str = "", status: int = 200
) -> HTMLResponse:
    return await page(
        v,
        "new_run.html",
        status=status,
        section="new",
        # An inbox-only skill answers requests; it has no runs to start.
        skills=[s for s in v.deps.skills.all() if not s.inbox_only],
        error=error,
        chosen=chosen or v.request.query_params.get("skill", ""),
        text=text,
    )


async def _run_context(v: Visit, run_id: str) -> dict[str, Any]:
    store = v.deps.store
    run = await store.get_run(run_id)
    events = await store.events(run_id)
    items = await store.list_items(run_id=run_id)
    return {
        "run": run,
        "usage": derive(events).usage if events else run.usage,
        "entries": entries(events),
        "waiting_on": [i for i in items if i.status is ItemStatus.PENDING],
    }
