"""Approval fatigue, measured, under /api (admins only):

    GET /api/stats?since=30d&min_repeats=3   cards per day, per person and per tool, time to
                                             decide (p50, p90), approve rate, and the calls
                                             approved unchanged every time with the rule
                                             that would stop asking (`pizzabot.agent.stats`);
                                             `start=2026-11-01T00:00Z` instead of `since`
                                             for a period from a given time

`pizzabot stats` and the web page's Stats show the same figures.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Query
from pydantic import BeforeValidator

from pizzabot.agent.stats import Stats, compute, in_utc, period_start
from pizzabot.channels.http.bodies import BoundedJsonRoute
from pizzabot.channels.http.deps import Deps
from pizzabot.channels.http.schema import errors
from pizzabot.channels.http.scopes import ADMIN, caller

__all__ = ["router"]

router = APIRouter(
    prefix="/api",
    route_class=BoundedJsonRoute,
    dependencies=[Depends(caller)],
    responses=errors(401, 403, 422),
)


_RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d{1,9})?([Zz]|[+-]\d{2}:\d{2})$")


def _rfc3339(value: object) -> object:
    """Only a date-time as RFC 3339 writes it (pydantic would also take a number of seconds,
    or a date alone, which the schema does not say)."""
    if not isinstance(value, str) or not _RFC3339.match(value):
        raise ValueError("a date and time with its offset, like 2026-11-01T00:00:00Z")
    return value


#: A time with its offset (RFC 3339), as the OpenAPI document says.
Start = Annotated[datetime, BeforeValidator(_rfc3339)]


@router.get("/stats", response_model=Stats, dependencies=[ADMIN], responses=errors(503))
async def stats(
    deps: Deps,
    since: str = Query(
        "30d", pattern=r"^[0-9]{1,4}[smhdw]$", description="how far back: 30d, 12h, 45m, 2w"
    ),
    start: Start | None = Query(None, description="from this time on, instead of `since`"),
    min_repeats: int = Query(3, ge=2, le=1000),
) -> Stats:
    if deps.history is None:
        raise HTTPException(503, "this server keeps no history to measure")
    now = deps.clock()
    begin = in_utc(start) if start is not None else period_start(since, now=now)
    items = await deps.history.cards(since=begin, until=now)
    return compute(items, since=begin, until=now, min_repeats=min_repeats)
