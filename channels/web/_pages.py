"""The web inbox's answers: a whole page, a live region's fragment, a redirect with a flash message.

Every answer carries the same security headers (no framing, no outside scripts, no caching,
no referrer), and a redirect's flash message is chosen by a fixed key, so no text from a URL is ever
echoed on the page.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from fastapi.responses import HTMLResponse, RedirectResponse, Response

from pizzabot.channels.web._render import render
from pizzabot.channels.web.live import held_fragment
from pizzabot.channels.web.site import Answered, Visit

#: Messages shown after a redirect, by the key in ``?flash=`` (any other query is ignored).
FLASHES: dict[str, tuple[str, str]] = {
    "approved": ("Approved. The run goes on.", "ok"),
    "edited": ("Approved with your arguments. The run goes on.", "ok"),
    "rejected": ("Rejected. The agent reads your reason.", "ok"),
    "extended": ("Budget extended. The run goes on.", "ok"),
    "stopped": ("The run will stop.", "ok"),
    "late": ("Someone decided this before you, so your decision was not used.", "warn"),
    "counted": ("Your approval is counted: another person must approve as well.", "ok"),
    "twice": ("You approved this already: another person must approve it.", "warn"),
    "read": ("Marked as read.", "ok"),
    "undone": ("Undone: the compensating call ran.", "ok"),
    "undo_failed": ("The Undo ran and failed: see below why.", "warn"),
    "undone_before": ("This was already undone: see below who undid it.", "warn"),
    "allread": ("All marked as read.", "ok"),
    "started": ("Run started.", "ok"),
    "cancelled": ("Run cancelled.", "ok"),
    "ended": ("The run had already ended.", "warn"),
    "sent": ("Message sent. The run continues.", "ok"),
    "waiting": ("The run is waiting on a decision: decide that item first.", "warn"),
    "kill": ("The kill switch is on: nothing new starts until it is lifted.", "warn"),
    "empty": ("Write a message first.", "warn"),
    "loggedout": ("Logged out.", "ok"),
    "revoked": ("Grant revoked: the next call it covered asks again.", "ok"),
    "away": ("Away set: your cards go to your delegate until then.", "ok"),
    "back": ("Welcome back: your cards come to you again.", "ok"),
    "answered": ("Answer sent.", "ok"),
    "declined": ("Declined: the asker is told you said no.", "ok"),
    "unsubscribed": ("That browser gets no more notifications.", "ok"),
    "passkey_removed": ("Passkey removed: it signs nobody in any more.", "ok"),
    "mailed": (
        "If that address belongs to someone who may sign in here, a sign-in link is on its "
        "way to it. The link works once, for 15 minutes.",
        "ok",
    ),
}

HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; manifest-src 'self'; worker-src 'self'; form-action 'self'; "
        "frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


async def page(v: Visit, template: str, *, status: int = 200, **context: Any) -> HTMLResponse:
    """A whole page: the template inside the site's frame (navigation, kill banner, flash)."""
    flash = FLASHES.get(v.request.query_params.get("flash", ""))
    kill = await v.deps.store.get_kill() if v.sid else None
    html = render(
        template,
        root=v.root,
        signed_in=v.sid is not None,
        admin=v.who is not None and v.who.is_admin,
        mail_signin=v.deps.mail_signin is not None,
        csrf=v.csrf,
        flash={"text": flash[0], "tone": flash[1]} if flash else None,
        kill=kill,
        **{"section": "", **context},
    )
    return HTMLResponse(html, status, headers=HEADERS)


async def error_page(v: Visit, status: int, title: str, message: str) -> HTMLResponse:
    return await page(v, "error.html", status=status, title=title, message=message)


async def not_found(v: Visit, what: str) -> HTMLResponse:
    return await error_page(v, 404, "Not found", f"No such {what}.")


def fragment(v: Visit, template: str, **context: Any) -> str:
    """A region of a page alone, as ``static/live.js`` asks for it."""
    return render(template, root=v.root, csrf=v.csrf, **context)


async def live(v: Visit, make: Callable[[], Awaitable[str]]) -> Response:
    """A live region's fragment (`make` renders it), held as its long-poll asks
    (`pizzabot.channels.web.live`); only a signed-in visit gets here. A session that ends
    while its request is held (a logout elsewhere) gets a bare 401 at the next look, never
    another fragment."""
    sid = v.sid
    assert sid is not None, "a live region depends on a signed-in session"
    looks = 0

    async def look() -> str:
        nonlocal looks
        looks += 1
        if looks > 1 and await v.deps.ended.ended(sid):
            raise Answered(Response(status_code=401, headers=HEADERS))
        return await make()

    return await held_fragment(v.request, sid, v.deps.live, look, HEADERS)


def go(v: Visit, path: str, flash: str | None = None) -> RedirectResponse:
    """POST-redirect-GET: to ``path`` on this site, showing the flash message with that key."""
    sep = "&" if "?" in path else "?"
    target = f"{v.root}{path}{sep}flash={flash}" if flash else f"{v.root}{path}"
    return RedirectResponse(target, 303, headers=HEADERS)


def safe_next(value: str | None) -> str | None:
    """A path on this site to go back to; anything else (another host, a scheme) is dropped."""
    if not value or not value.startswith("/") or value.startswith(("//", "/\\")):
        return None
    if any(c in value for c in "\r\n\\"):
        return None
    return value
