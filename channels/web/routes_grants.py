"""The Grants tab: the approvals that said "don't ask again for …", and revoking them.

A grant is made by an approval (the item page's "Approve, and don't ask again" buttons);
here it is listed with what it covers, who granted it and how often it was used, and
revoked with one button: from the next call on, the tool asks again.
"""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import Response

from pizzabot.agent.errors import NotAllowed, NotFound
from pizzabot.agent.policy.grants import revoke_grant
from pizzabot.channels.web._pages import error_page, go, not_found, page
from pizzabot.channels.web.deps import Posted, SignedIn

__all__ = ["router"]

router = APIRouter()


@router.get("/grants")
async def grants(v: SignedIn) -> Response:
    kept, now = v.deps.grants, v.deps.inbox.ctx.clock()
    holding = await kept.list_grants(now=now) if kept is not None else []
    every = await kept.list_grants(now=now, ended=True) if kept is not None else []
    current = {g.id for g in holding}
    return await page(
        v,
        "grants.html",
        section="grants",
        holding=holding,
        ended=[g for g in every if g.id not in current][:50],
        kept=kept is not None,
    )


@router.post("/grants/{grant_id}/revoke")
async def revoke(grant_id: str, post: Posted) -> Response:
    v = post.visit
    kept = v.deps.grants
    if kept is None:
        return await not_found(v, "grant")
    now = v.deps.inbox.ctx.clock()
    try:
        await revoke_grant(kept, v.deps.policy, v.deps.store, grant_id, by=v.by, now=now)
    except NotAllowed as exc:
        return await error_page(v, 403, "Not allowed", str(exc))
    except NotFound:
        return await not_found(v, "grant")
    return go(v, "/grants", "revoked")
