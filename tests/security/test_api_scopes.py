"""Default-deny on the API: every route says the least scope a token needs to call it, so a
route added without one cannot be open to every token (an agent's `ask` token included)."""

from __future__ import annotations

from typing import Any


def test_every_api_route_names_the_least_scope_it_needs() -> None:
    """Default-deny: a route added without saying which scope it needs would be open to
    every token; this catches it before it ships."""
    from fastapi.routing import APIRoute

    from pizzabot.bot.server import create_app
    from pizzabot.bot.settings import Settings

    app = create_app(Settings(), token="t" * 32)

    def needs(dependant: object) -> set[str]:
        found: set[str] = set()
        for dep in getattr(dependant, "dependencies", []):
            name = getattr(dep.call, "__name__", "")
            if name.startswith("needs_"):
                found.add(name)
            found |= needs(dep)
        return found

    def routes() -> list[Any]:
        found: list[Any] = []
        for route in app.routes:
            if isinstance(route, APIRoute):
                found.append(route)
            elif hasattr(route, "effective_route_contexts"):  # an included router
                found += list(route.effective_route_contexts())
        return [r for r in found if r.path.startswith("/api")]

    api = routes()
    assert len(api) > 20
    missing = [f"{sorted(r.methods)} {r.path}" for r in api if not needs(r.dependant)]
    assert missing == []
