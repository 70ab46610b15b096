"""The web inbox: a small HTML page, the fallback channel that needs nothing but a browser.

The owner opens it with the login link the server prints (the API token, swapped at once for
a signed session cookie), sees the Action and Unread boxes and all runs, decides action items
(approve, edit through a form made from the tool's JSON schema, reject with a reason),
follows a run's timeline, cancels or follows up a run, starts runs and reads the audit log.
Plain forms and POST-redirect-GET: JavaScript only refreshes a few regions.

The web page reads the store directly and decides through `pizzabot.agent.inbox.Inbox.decide`, so it
needs no outbox delivery of its own. `pizzabot.bot.wire_web` makes a `WebSite` (how to reach the
running services, the cookie's and the login throttle's settings) and calls `install`.

    deps.py           who is asking: the services, the session, the CSRF check (dependencies)
    routes_login.py   /login, /logout
    routes_items.py   the inbox, an item's page, deciding
    routes_runs.py    runs: list, start, timeline, cancel, follow up
    routes_logs.py    the audit log and the schedules
    routes_stats.py   approval fatigue, measured (admins)
    routes_phone.py   installing the page (manifest, service worker), Web Push subscriptions
    routes_passkeys.py passkeys: add, remove, sign in, confirm a card that needs one
    phone.py          what those two need (`PhoneDeps`)
    router.py         all of them in one router; install
"""

from pizzabot.channels.web._render import STATIC as STATIC_DIR
from pizzabot.channels.web._session import COOKIE as SESSION_COOKIE
from pizzabot.channels.web._session import Sessions
from pizzabot.channels.web.deps import WebDeps, WebSite
from pizzabot.channels.web.phone import PhoneDeps
from pizzabot.channels.web.router import install, web_router

__all__ = [
    "SESSION_COOKIE",
    "STATIC_DIR",
    "PhoneDeps",
    "Sessions",
    "WebDeps",
    "WebSite",
    "install",
    "web_router",
]
