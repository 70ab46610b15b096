"""The web inbox's read-only pages: the audit log and the schedules.

Schedules are only shown here; the CLI and the API change them.
"""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import Response

from pizzabot.channels.web._pages import error_page, page
from pizzabot.channels.web.deps import SignedIn

__all__ = ["router"]

router = APIRouter()


@router.get("/audit")
async def audit(v: SignedIn) -> Response:
    if not v.by.is_admin:
        return await error_page(v, 403, "Not allowed", "Only an admin reads the audit log.")
    log = await v.deps.store.audit_log(limit=500)
    return await page(v, "audit.html", section="audit", entries=log)


@router.get("/schedules")
async def schedules(v: SignedIn) -> Response:
    listing = await v.deps.schedules() if v.deps.schedules else {"items": [], "errors": []}
    return await page(
        v,
        "schedules.html",
        section="schedules",
        schedules=listing["items"],
        problems=listing["errors"],
    )
