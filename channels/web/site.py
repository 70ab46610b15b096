"""The web inbox's nouns: what it needs from the running server (`WebDeps`), the site's
settings (`WebSite`), one request's visit (`Visit`) and a posted form (`Post`). The pages
(`_pages`) and the route dependencies (`deps`) both use them.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from fastapi import Request
from fastapi.responses import Response
from starlette.datastructures import FormData

from pizzabot.agent.inbox import Inbox
from pizzabot.agent.policy import Access, Principal
from pizzabot.agent.policy.grants import Grants
from pizzabot.agent.policy.tokens import Tokens
from pizzabot.agent.runs import Runs
from pizzabot.agent.skills import SkillBook
from pizzabot.agent.stats import CardHistory
from pizzabot.agent.store import Store
from pizzabot.channels.web._session import LoginThrottle, SessionEnds, Sessions
from pizzabot.channels.web.live import Changes
from pizzabot.channels.web.mail_signin import MailSignIn
from pizzabot.channels.web.phone import PhoneDeps

__all__ = ["CHANNEL", "Answered", "Post", "Visit", "WebDeps", "WebSite", "form_text"]

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
    #: Web Push and passkeys (`pizzabot.channels.web.phone`); None: the page offers neither.
    phone: PhoneDeps | None = None
    #: Sign-in links by mail for the people the skills list; None: the page offers none.
    mail_signin: MailSignIn | None = None
    #: What the live regions' long-polls wait on, rung when the inbox changes (one for the
    #: process); None: a live region is answered at once, as a plain poll.
    live: Changes | None = None
    #: The cards the Stats page measures (`pizzabot.agent.stats`); None: the page has none.
    history: CardHistory | None = None

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
