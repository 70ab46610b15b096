"""Approve all on the web page: every waiting call of one model turn, from any of its cards.

An item page shows "Approve all (N)" when its run's latest model reply left N > 1 calls
waiting (`pizzabot.agent.batch.turn_items`). The form posts here; each call is approved on its own
(`pizzabot.agent.batch.approve_all`), and the answer is a page listing what was approved and what was
left out and why, since those reasons are no fixed flash message a redirect could carry.

The form carries a `seen` field per call it counted, "item id:digest" of that call's card as
the page showed it, so a call edited since is left out ("this card changed"), not approved; a
form without them (a page from before they were sent) approves nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

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
    seen = _seen(post.form.getlist("seen"))
    batch = await approve_all(v.deps.inbox, run.id, by=v.by, seen=seen)
    return await page(v, "batch.html", section="inbox", run=run, batch=batch)


#: Calls one form may name: more than any model turn asks for at once.
_MAX_SEEN = 200


def _seen(fields: Sequence[object]) -> dict[str, str]:
    """{item id: digest} from the form's "id:digest" fields (anything else is ignored: the call
    it meant to name counts as not shown, and is left out)."""
    seen: dict[str, str] = {}
    for field in fields[:_MAX_SEEN]:
        if isinstance(field, str) and ":" in field:
            item_id, digest = field.rsplit(":", 1)
            seen[item_id.strip()[:64]] = digest.strip()[:64]
    return seen
