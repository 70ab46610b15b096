"""JSON bodies as the API reads them: only numbers JSON has, each finite and of a size a form
field takes, and nesting a parser can follow.

FastAPI parses a JSON body with `json.loads`, which accepts `NaN` and `Infinity` and turns a
number that overflows into infinity; the routes here read bodies through
`pizzabot.agent.argforms.loads_body` instead (`BoundedJsonRoute`), so such a value anywhere is a 422
naming its place (`args.amount`), not a value a rule judges and the store keeps as null.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import HTTPException, Request
from fastapi.responses import Response
from fastapi.routing import APIRoute

from pizzabot.agent.argforms import NumbersOutOfRange, loads_body
from pizzabot.agent.errors import InvalidArguments

__all__ = ["BoundedJsonRoute"]


class _JsonBody(Request):
    """A request whose JSON body has only numbers JSON has (`loads_body`): `NaN`, `Infinity`
    or `1e500000` anywhere is a 422 naming its place, and an integer literal of thousands of
    digits (which `int` refuses past 4,300) is too, not the bare 400 FastAPI gives for any
    other exception while parsing."""

    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            body = await self.body()
            try:
                self._json = loads_body(body)
            except NumbersOutOfRange as exc:
                detail = {"message": str(InvalidArguments(exc.errors)), "errors": exc.errors}
                raise HTTPException(422, detail) from None
            except json.JSONDecodeError:
                raise
            except (ValueError, RecursionError) as exc:
                doc = body.decode("utf-8", "replace")
                why = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
                raise json.JSONDecodeError(f"not valid JSON ({why})", doc, 0) from None
        return self._json


class BoundedJsonRoute(APIRoute):
    """A route that reads its JSON body as `_JsonBody` does."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handle = super().get_route_handler()

        async def handler(request: Request) -> Response:
            return await handle(_JsonBody(request.scope, request.receive))

        return handler
