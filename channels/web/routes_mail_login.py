"""Signing in by a link in a mail (`pizzabot.channels.web.mail_signin`): ask for one, use one.

Asking answers with the same page whatever the address (nothing tells who is listed), and
counts toward the per-address login throttle like a failed login, so nobody can have the
server mail a flood. Opening the link shows a page with one button; only its post uses the
link up: a mail scanner that fetches every link in a mail signs nobody in, and burns nothing.
A used, expired or unknown link is refused, audited and counted as a failed login.
"""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import RedirectResponse, Response

from pizzabot.channels.web._pages import HEADERS, go, page, safe_next
from pizzabot.channels.web.deps import Visit, Visitor, form_text
from pizzabot.channels.web.routes_login import start_session

__all__ = ["router"]

router = APIRouter()

_REFUSED = (
    "This sign-in link was used already, has expired, or is not one this server made. "
    "Ask for a new one below."
)


@router.post("/login/mail/send")
async def ask(v: Visitor) -> Response:
    signin = v.deps.mail_signin
    if signin is None:
        return await _off(v)
    form = await v.request.form()
    client = _client(v)
    if wait := v.site.throttle.retry_after(client):
        error = f"Too many tries from your address. Try again in {wait} seconds."
        refusal = await page(v, "login.html", status=429, error=error, next=None)
        refusal.headers["Retry-After"] = str(wait)
        return refusal
    v.site.throttle.failed(client)
    await signin.ask(form_text(form, "address")[:320], client=client)
    return go(v, "/login", "mailed")


@router.get("/login/mail")
async def link_page(v: Visitor) -> Response:
    """The page a mailed link opens: one button that uses the link (its secret stays in the
    form, so it goes no further than this server)."""
    if v.deps.mail_signin is None:
        return await _off(v)
    token = v.request.query_params.get("token", "")
    return await page(v, "mail_login.html", token=token[:100])


@router.post("/login/mail")
async def use(v: Visitor) -> Response:
    signin = v.deps.mail_signin
    if signin is None:
        return await _off(v)
    client = _client(v)
    if wait := v.site.throttle.retry_after(client):
        error = f"Too many failed logins from your address. Try again in {wait} seconds."
        return await page(v, "login.html", status=429, error=error, next=None)
    form = await v.request.form()
    who = await signin.redeem(form_text(form, "token").strip()[:100], client=client)
    if who is None:
        v.site.throttle.failed(client)
        return await page(v, "login.html", status=401, error=_REFUSED, next=None)
    v.site.throttle.succeeded(client)
    target = f"{v.root}{safe_next(form_text(form, 'next')) or '/'}"
    response = RedirectResponse(target, 303, headers=HEADERS)
    start_session(v, who, response)
    return response


def _client(v: Visit) -> str:
    return v.request.client.host if v.request.client else "unknown"


async def _off(v: Visit) -> Response:
    return await page(
        v,
        "error.html",
        status=404,
        title="Not offered",
        message="This server mails no sign-in links: log in with a token or a passkey.",
    )
