"""Approve all on the web page: every waiting call of one model turn, from any of its cards.

An item page shows "Approve all (N)" when its run's latest model reply left N > 1 calls
waiting (`pizzabot.agent.batch.turn_items`). The form posts here; each call is approved on its own
(`pizzabot.agent.batch.approve_all`), and the answer is a page listing what was approved and what was
left out and why, since those reasons are no fixed flash message a redirect could carry.
"""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import Response

from pizzabot.agent.batch import approve_all
from pizzabot.agent.errors import NotFound
from pizzabot.channels.web._pages import not_found, page
from pizzabot.channels.web.deps import Posted

__all__ = ["router"]

router = APIRouter()


@router.post("/runs/{run_id}/approve-all")
async def approve_all_post(run_id: str, post: Posted) -> Response:
    v = post.visit
    try:
        run = await v.deps.store.get_run(run_id)
    except NotFound:
        return await not_found(v, "run")
    batch = await approve_all(v.deps.inbox, run.id, by=v.by)
    return await page(v, "batch.html", section="inbox", run=run, batch=batch)
