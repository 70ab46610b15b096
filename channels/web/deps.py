"""What every web route depends on: the services, who is asking, and whether a form may act.

The routes declare these as FastAPI dependencies instead of repeating a prologue:

- `Visitor`: anyone; the session is read from the cookie (the login pages);
- `SignedIn`: a page; without a session the visitor is sent to the login form;
- `SignedInLive`: a live region's fragment ``static/live.js`` asks for; a bare 401 without a
  session;
- `Posted`: a state-changing form; 401 without a session, 403 without the signed-in session's CSRF
  token. The session is checked before the body is read, so an anonymous post is refused
  unparsed.

A dependency that must answer instead of the route raises `Answered`; `install` (in
`pizzabot.channels.web.router`) registers the handler that sends its response. The services come from
the `WebSite` kept at ``app.state.web_site``: the composition root (`pizzabot.bot.wire_web`) makes it
with a function that looks the running services up per request, so the routes exist before
the service has started.
"""

from __future__ import annotations

from typing import Annotated
from urllib.parse import quote

from fastapi import Depends, Request
from fastapi.responses import RedirectResponse, Response

from pizzabot.agent.policy import Principal
from pizzabot.agent.policy.tokens import principal_of
from pizzabot.channels.web._pages import HEADERS, error_page, page
from pizzabot.channels.web._session import (
    COOKIE,
    Sessions,
    address_digest,
    mailed_digest,
    token_of,
)
from pizzabot.channels.web.mail_signin import listed_addresses
from pizzabot.channels.web.site import (
    CHANNEL,
    Answered,
    Post,
    Visit,
    WebDeps,
    WebSite,
    form_text,
)

__all__ = [
    "CHANNEL",
    "Answered",
    "Post",
    "Posted",
    "SignedIn",
    "SignedInLive",
    "Visit",
    "Visitor",
    "WebDeps",
    "WebSite",
    "form_text",
]


async def web_site(request: Request) -> WebSite:
    site = getattr(request.app.state, "web_site", None)
    if not isinstance(site, WebSite):
        raise RuntimeError("the web inbox's routes need channels.web.install(app, site)")
    return site


async def visit(request: Request, site: Annotated[WebSite, Depends(web_site)]) -> Visit:
    deps = site.deps(request)
    sessions = Sessions(deps.token, clock=site.clock)
    sid = sessions.verify(request.cookies.get(COOKIE))
    if sid is not None and await deps.ended.ended(sid):
        sid = None
    who = await _principal(deps, sid) if sid is not None else None
    return Visit(request, site, deps, sessions, sid if who is not None else None, who)


async def _principal(deps: WebDeps, sid: str) -> Principal | None:
    """Who a session acts as: the owner, a named token that is still in force, or a person
    signed in by a mail link whose address a skill still lists."""
    digest = mailed_digest(sid)
    if digest is not None:
        found = (a for a in listed_addresses(deps.skills) if address_digest(a) == digest)
        address = next(found, None)
        return Principal.by_mail(address) if address is not None else None
    token_id = token_of(sid)
    if token_id is None:
        return Principal.owner(CHANNEL)
    token = await deps.tokens.by_id(token_id) if deps.tokens is not None else None
    return principal_of(token, CHANNEL) if token is not None else None


async def signed_in(v: Annotated[Visit, Depends(visit)]) -> Visit:
    """For a page: the visit when signed in; else the way to the login form."""
    if v.sid is not None:
        return v
    request = v.request
    path = request.url.path
    if v.root and path.startswith(v.root):
        path = path[len(v.root) :]
    here = path + (f"?{request.url.query}" if request.url.query else "")
    if request.headers.get("sec-fetch-site") == "cross-site":
        # A link from Slack or a mail client: a SameSite=Strict cookie is not sent on that
        # first navigation. Loading the same address again from this page sends it.
        raise Answered(await page(v, "bounce.html", target=here))
    login = f"{v.root}/login?next={quote(here, safe='')}"
    raise Answered(RedirectResponse(login, 303, headers=HEADERS))


async def signed_in_live(v: Annotated[Visit, Depends(visit)]) -> Visit:
    """For a live region's fragment: the visit when signed in; else a bare 401 for the script."""
    if v.sid is None:
        raise Answered(Response(status_code=401))
    return v


async def csrf_ok(v: Annotated[Visit, Depends(visit)]) -> Post:
    """For a form post: the form, when signed in and carrying the signed-in session's CSRF token."""
    if v.sid is None:
        raise Answered(
            await error_page(
                v,
                401,
                "Not logged in",
                "Your session has ended. Log in again, then repeat what you did.",
            )
        )
    form = await v.request.form()
    if not v.sessions.csrf_ok(v.sid, form_text(form, "csrf")):
        raise Answered(
            await error_page(
                v,
                403,
                "Refused",
                "This form was not sent by this page, or it is out of date. "
                "Go back, reload the page and try again.",
            )
        )
    return Post(v, form)


Visitor = Annotated[Visit, Depends(visit)]
SignedIn = Annotated[Visit, Depends(signed_in)]
SignedInLive = Annotated[Visit, Depends(signed_in_live)]
Posted = Annotated[Post, Depends(csrf_ok)]
