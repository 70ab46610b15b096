"""The web inbox: a small HTML page, the fallback channel that needs nothing but a browser.

The owner opens it with the login link the server prints (the API token, swapped at once for
a signed session cookie), sees the Action and Unread boxes and all runs, decides action items
(approve, edit through a form made from the tool's JSON schema, reject with a reason),
follows a run's timeline, cancels or follows up a run, starts runs and reads the audit log.
Plain forms and POST-redirect-GET: JavaScript only refreshes a few regions.

The web page reads the store directly and decides through `agent.inbox.Inbox.decide`, so it
needs no outbox delivery of its own. `bot.wire_web` includes `web_router` and serves
`STATIC_DIR` at ``/static``.
"""

from channels.web._render import STATIC as STATIC_DIR
from channels.web._session import COOKIE as SESSION_COOKIE
from channels.web._session import Sessions
from channels.web.router import WebDeps, web_router

__all__ = ["SESSION_COOKIE", "STATIC_DIR", "Sessions", "WebDeps", "web_router"]
