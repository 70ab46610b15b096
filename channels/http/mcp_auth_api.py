"""OAuth connections of skills' MCP servers (`auth: oauth`; `pizzabot.agent.mcp_oauth`):

    GET    /api/mcp-auth                   {"items": [connection]}: who holds tokens (admins;
                                           never a token)
    DELETE /api/mcp-auth/{skill}/{server}  {"skill", "server", "revoked", "at_service"}: the
                                           tokens forgotten and the connection dropped (the
                                           next run asks a person to connect again), and the
                                           tokens revoked at the service (admins)
    GET    /mcp-auth/callback              where the service sends the person's browser back
                                           with the code, on any server process (no API
                                           token: the `state` it carries must be one a
                                           consent waits for; any other is refused, 400)
    GET    /mcp-auth/client.json           this client's metadata document, where the public
                                           URL is https (its URL is the client ID)

Routes only translate; the consents and the token files are `McpAuth`'s.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Path, Request
from fastapi.responses import JSONResponse, PlainTextResponse
from pydantic import BaseModel

from pizzabot.agent.mcp_oauth import CALLBACK_PATH, DOCUMENT_PATH, McpAuth
from pizzabot.agent.policy.principal import Principal
from pizzabot.channels.http.bodies import BoundedJsonRoute
from pizzabot.channels.http.deps import ApiDeps, Deps
from pizzabot.channels.http.schema import errors
from pizzabot.channels.http.scopes import ADMIN, caller

__all__ = ["callbacks", "router"]

router = APIRouter(
    prefix="/api",
    route_class=BoundedJsonRoute,
    dependencies=[Depends(caller)],
    responses=errors(401, 403, 404, 422),
)
#: The browser's way back: outside /api, so it needs no token.
callbacks = APIRouter()

_NAME = Annotated[str, Path(pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}$")]


class McpAuthOut(BaseModel):
    skill: str
    server: str
    scopes: list[str]
    #: When the access token expires (Unix seconds; None: unknown). A refreshable one is
    #: renewed without asking anyone.
    expires_at: float | None
    refreshable: bool


class McpAuthList(BaseModel):
    items: list[McpAuthOut]


def _auth(deps: ApiDeps) -> McpAuth:
    if deps.mcp_auth is None:
        raise HTTPException(404, "this server keeps no MCP OAuth connections")
    return deps.mcp_auth


@router.get("/mcp-auth", response_model=McpAuthList, dependencies=[ADMIN])
async def connections(deps: Deps) -> McpAuthList:
    items = [McpAuthOut(**vars(c)) for c in _auth(deps).connected()]
    return McpAuthList(items=items)


class McpAuthRevoked(BaseModel):
    skill: str
    server: str
    revoked: bool
    #: What the service's revocation endpoint did (RFC 7009), in words: "revoked", or why
    #: not (none named, refused, not reached); the tokens are forgotten here either way.
    at_service: str


@router.delete("/mcp-auth/{skill}/{server}", response_model=McpAuthRevoked)
async def revoke(skill: _NAME, server: _NAME, deps: Deps, who: Principal = ADMIN) -> McpAuthRevoked:
    at_service = await _auth(deps).revoke(skill, server)
    if at_service is None:
        raise HTTPException(404, f"skill {skill!r} holds no tokens for MCP server {server!r}")
    await deps.store.audit(
        action="mcp_auth_revoked",
        actor=who.identity,
        channel=who.channel,
        now=deps.clock(),
        detail={"skill": skill, "server": server, "at_service": at_service},
    )
    return McpAuthRevoked(skill=skill, server=server, revoked=True, at_service=at_service)


@callbacks.get(CALLBACK_PATH, include_in_schema=False)
async def callback(request: Request) -> PlainTextResponse:
    deps = getattr(request.app.state, "api", None)
    auth = deps.mcp_auth if isinstance(deps, ApiDeps) else None
    if auth is None:
        return PlainTextResponse("Nothing is awaited here.", status_code=404)
    status, text = await auth.finish(dict(request.query_params))
    headers = {"Cache-Control": "no-store", "Referrer-Policy": "no-referrer"}
    return PlainTextResponse(text, status_code=status, headers=headers)


@callbacks.get(DOCUMENT_PATH, include_in_schema=False)
async def client_document(request: Request) -> JSONResponse:
    deps = getattr(request.app.state, "api", None)
    auth = deps.mcp_auth if isinstance(deps, ApiDeps) else None
    document = auth.client_document() if auth is not None else None
    if document is None:
        return JSONResponse({"detail": "no client metadata document is served here"}, 404)
    return JSONResponse(document, headers={"Cache-Control": "max-age=3600"})
