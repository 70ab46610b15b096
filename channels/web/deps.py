"""What every web route depends on: the services, who is asking, and whether a form may act.

The routes declare these as FastAPI dependencies instead of repeating a prologue:

- `Visitor`: anyone; the session is read from the cookie (the login pages);
- `SignedIn`: a page; without a session the visitor is sent to the login form;
- `SignedInLive`: an HTML fragment polled by ``static/live.js``; a bare 401 without a session;
- `Posted`: a state-changing form; 401 without a session, 403 without the signed-in session's CSRF
  token. The session is checked before the body is read, so an anonymous post is refused
  unparsed.

A dependency that must answer instead of the route raises `Answered`; `install` (in
`channels.web.router`) registers the handler that sends its response. The services come from
the `WebSite` kept at ``app.state.web_site``: the composition root (`bot.wire_web`) makes it
with a function that looks the running services up per request, so the routes exist before
the service has started.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated, Any
from urllib.parse import quote

from fastapi import Depends, Request
from fastapi.responses import RedirectResponse, Response
from starlette.datastructures import FormData

from agent.inbox import Inbox
from agent.policy import Access, Principal
from agent.policy.grants import Grants
from agent.policy.tokens import Tokens, principal_of
from agent.runs import Runs
from agent.skills import SkillBook
from agent.store import Store
from channels.web._pages import HEADERS, error_page, page
from channels.web._session import COOKIE, LoginThrottle, SessionEnds, Sessions, token_of
from channels.web.phone import PhoneDeps

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
]

#: Who signs in with the API token is the owner; with a named token, that token's principal.
CHANNEL = "web"


@dataclass(frozen=True)
class WebDeps:
    """What the web inbox needs from the running service, looked up per request."""

    store: Store
    inbox: Inbox
    runs: Runs
    skills: SkillBook
    token: str
    #: Sessions ended by logout, refused from then on by every server sharing the database.
    ended: SessionEnds
    #: The schedules with their next fire times (`{"items": [...], "errors": [...]}`), when
    #: the server runs a scheduler; the page is read-only (the CLI and API change schedules).
    schedules: Callable[[], Awaitable[dict[str, Any]]] | None = None
    #: The grants ("don't ask again for …"), listed and revoked on the Grants tab; None when
    #: the server keeps none.
    grants: Grants | None = None
    #: Named tokens (a person may sign in with a decide or admin token); None: only the API
    #: token signs in.
    tokens: Tokens | None = None
    #: Who may do what; by default the inbox's.
    access: Access | None = None
    #: Web Push and passkeys (`channels.web.phone`); None: the page offers neither.
    phone: PhoneDeps | None = None

    @property
    def policy(self) -> Access:
        return self.access or self.inbox.ctx.access


class WebSite:
    """The web inbox of one app: how to reach the services, its cookie, clock and throttle.

    ``deps`` gives the services for a request. ``secure_cookie`` marks the session cookie
    Secure, for a page served over HTTPS. A client address with ``login_max_failures`` failed
    logins within ``login_window`` seconds is refused (429) until that window ends.
    """

    def __init__(
        self,
        deps: Callable[[Request], WebDeps],
        *,
        secure_cookie: bool = False,
        clock: Callable[[], float] = time.time,
        login_max_failures: int = 10,
        login_window: float = 300.0,
    ) -> None:
        self.deps = deps
        self.secure_cookie = secure_cookie
        self.clock = clock
        self.throttle = LoginThrottle(
            max_failures=login_max_failures, window=login_window, clock=clock
        )


class Answered(Exception):
    """Raised by a dependency that answers the request itself (a redirect, a refusal)."""

    def __init__(self, response: Response) -> None:
        super().__init__(response.status_code)
        self.response = response


@dataclass(frozen=True)
class Visit:
    """One request to the web inbox: its services, its session (None: not signed in)."""

    request: Request
    site: WebSite
    deps: WebDeps
    sessions: Sessions
    sid: str | None
    #: Who is signed in (None: nobody).
    who: Principal | None = None

    @property
    def by(self) -> Principal:
        """Who acts: the signed-in principal (a route that acts needs a session first)."""
        assert self.who is not None, "a route that acts depends on a signed-in session"
        return self.who

    @property
    def root(self) -> str:
        return str(self.request.scope.get("root_path", "")).rstrip("/")

    @property
    def csrf(self) -> str:
        return self.sessions.csrf(self.sid) if self.sid else ""


@dataclass(frozen=True)
class Post:
    """A form post from a signed-in session that carried its CSRF token."""

    visit: Visit
    form: FormData

    def text(self, name: str) -> str:
        return form_text(self.form, name)


def form_text(form: FormData, name: str) -> str:
    """A text field of a form; "" when it is missing or a file."""
    value = form.get(name)
    return value if isinstance(value, str) else ""


def web_site(request: Request) -> WebSite:
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
    """Who a session acts as: the owner, or a named token that is still in force."""
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
    """For a polled fragment: the visit when signed in; else a bare 401 for the script."""
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
