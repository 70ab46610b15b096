"""The Away page: say you are away until a time and who decides for you, or that you are
back. An admin (the owner) may say it of anyone. See `pizzabot.agent.policy.away`."""

from __future__ import annotations

from datetime import UTC, datetime

from fastapi import APIRouter
from fastapi.responses import Response

from pizzabot.agent.errors import InvalidArguments, NotAllowed
from pizzabot.agent.policy.away import AwayAccess, known_people
from pizzabot.agent.policy.away_desk import away_list, come_back, go_away, person_named
from pizzabot.channels.web._pages import error_page, go, not_found, page
from pizzabot.channels.web.deps import Posted, SignedIn
from pizzabot.channels.web.site import form_text

__all__ = ["router"]

router = APIRouter()


def _until(text: str) -> datetime:
    """A `datetime-local` field's value, read as UTC."""
    try:
        at = datetime.fromisoformat(text.strip())
    except ValueError:
        raise InvalidArguments({"until": "give a date and time"}) from None
    return at if at.tzinfo is not None else at.replace(tzinfo=UTC)


@router.get("/away")
async def away_page(v: SignedIn) -> Response:
    access = v.deps.policy
    if not isinstance(access, AwayAccess):
        return await not_found(v, "away page")
    return await page(
        v,
        "away.html",
        section="away",
        away=await away_list(access),
        me=person_named(access, v.by),
        people=sorted(known_people(access.skills)),
    )


@router.post("/away")
async def set_away(post: Posted) -> Response:
    v, form = post.visit, post.form
    access = v.deps.policy
    if not isinstance(access, AwayAccess):
        return await not_found(v, "away page")
    person = form_text(form, "person") or None
    try:
        if form_text(form, "back"):
            await come_back(access, v.deps.store, by=v.by, person=person)
            return go(v, "/away", "back")
        until = _until(form_text(form, "until"))
        delegate = form_text(form, "delegate")
        await go_away(access, v.deps.store, by=v.by, delegate=delegate, until=until, person=person)
    except NotAllowed as exc:
        return await error_page(v, 403, "Not allowed", str(exc))
    except InvalidArguments as exc:
        said = "; ".join(f"{k}: {w}" if k else w for k, w in exc.errors.items())
        return await error_page(v, 422, "Not set", said)
    return go(v, "/away", "away")
