"""The Stats page (admins only): approval fatigue, measured — the figures of `GET /api/stats`
(`pizzabot.agent.stats.compute` over the same cards), for a period the form picks."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import Response

from pizzabot.agent.stats import compute, period_start
from pizzabot.channels.web._pages import error_page, page
from pizzabot.channels.web.deps import SignedIn

__all__ = ["PERIODS", "router"]

router = APIRouter()

#: The periods the page offers (any duration or date works in the address).
PERIODS = ("1d", "7d", "30d", "90d")


@router.get("/stats")
async def stats(v: SignedIn, since: str = "30d", min_repeats: int = 3) -> Response:
    if not v.by.is_admin:
        return await error_page(v, 403, "Not allowed", "Only an admin reads the stats.")
    history = v.deps.history
    if history is None:
        return await error_page(v, 404, "Not found", "This server keeps no history to measure.")
    now = v.deps.inbox.ctx.clock()
    try:
        start = period_start(since[:40], now=now)
    except ValueError as exc:
        return await error_page(v, 422, "Not a period", str(exc))
    least = min(max(min_repeats, 2), 1000)
    items = await history.cards(since=start, until=now)
    figures = compute(items, since=start, until=now, min_repeats=least)
    return await page(
        v, "stats.html", section="stats", stats=figures, since=since[:40], periods=PERIODS
    )
