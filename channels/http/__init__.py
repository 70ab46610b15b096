"""The HTTP API under /api: a channel like the web page, translating HTTP to the engine's
`Runs`, `Inbox` and `Requests`, and the engine's errors to status codes.

    guard.py          before any route reads a byte: the token (as a principal), body limits,
                      Slack's signature
    scopes.py         who is calling, and the least scope each route needs
    deps.py           what the routes get from the running server (`ApiDeps`)
    bodies.py         JSON bodies with only the numbers JSON has
    schema.py         the documented shapes; answers.py makes them from the engine's nouns
    errors.py         the engine's errors as HTTP answers
    runs_api.py, items_api.py, control_api.py, requests_api.py, grants_api.py,
    schedules_api.py, tokens_api.py, push_api.py, coding_hooks_api.py (Claude Code's http hooks),
    away_api.py, stats_api.py, mcp_auth_api.py
                      the routes, one module per area

`install` adds every router and the error handlers to an app; the composition root sets the
`ApiDeps` on `app.state.api` once the server has started.
"""

from fastapi import FastAPI

from pizzabot.channels.http import (
    away_api,
    coding_hooks_api,
    control_api,
    grants_api,
    items_api,
    mcp_auth_api,
    push_api,
    requests_api,
    runs_api,
    schedules_api,
    stats_api,
    tokens_api,
)
from pizzabot.channels.http.deps import ApiDeps
from pizzabot.channels.http.errors import install_error_handlers

__all__ = ["ApiDeps", "install"]


def install(app: FastAPI) -> None:
    """The API's routes and its error handlers, on `app`."""
    install_error_handlers(app)
    for module in (
        runs_api,
        items_api,
        control_api,
        requests_api,
        grants_api,
        tokens_api,
        schedules_api,
        push_api,
        mcp_auth_api,
        coding_hooks_api,
        away_api,
        stats_api,
    ):
        app.include_router(module.router)
    app.include_router(mcp_auth_api.callbacks)
