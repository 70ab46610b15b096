"""The HTTP API under /api: a bearer token on every call, JSON in and out.

Routes only translate HTTP to the engine's functions (`Runs`, `Inbox`) and the engine's
errors to status codes: 401 no token, 403 not allowed (out of the token's scope, or the
policy says no), 404 not found, 409 conflict (already decided, the card changed, the kill
switch), 422 invalid input. Every answer, errors included, is declared in `bot.api_schema`,
so `/openapi.json` says what the server does.

The token is turned into a principal before any body is read (`bot.http_guard.TokenGate`):
the owner's API token, or a named token with its scope (`agent.policy.tokens`). Every route
says the least scope it needs (`needs`); the engine then asks the policy for what the
principal may do with that (`agent.policy.access`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Coroutine
from dataclasses import asdict
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, FastAPI, HTTPException, Query, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.responses import JSONResponse, Response
from fastapi.routing import APIRoute
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match, Route

from agent.argforms import NumbersOutOfRange, loads_body
from agent.card_digest import card_digest
from agent.errors import (
    AlreadyDecided,
    CardChanged,
    Conflict,
    InvalidArguments,
    NotAllowed,
    NotFound,
)
from agent.model import Box, Event, Item, ItemStatus, Run, decision_from
from agent.policy.principal import Principal, Scope
from bot import api_schema as out
from bot.api_schema import errors
from bot.http_guard import PRINCIPAL
from bot.services import Services

bearer = HTTPBearer(auto_error=False)


def services(request: Request) -> Services:
    svc: Services = request.app.state.services
    return svc


def caller(
    request: Request, creds: HTTPAuthorizationCredentials | None = Depends(bearer)
) -> Principal:
    """Who is calling, as the token gate found it before the body was read."""
    who = request.scope.get(PRINCIPAL)
    if creds is None or not isinstance(who, Principal):
        raise HTTPException(
            401, "missing or wrong API token", headers={"WWW-Authenticate": "Bearer"}
        )
    return who


Caller = Annotated[Principal, Depends(caller)]


def needs(scope: Scope) -> Any:
    """A route's dependency: 403 unless the caller's scope covers `scope`, saying what it
    does allow."""

    def check(who: Caller) -> Principal:
        if not who.scope.covers(scope):
            raise HTTPException(
                403,
                f"this token's scope is {who.scope}: it may {who.scope.allows()}; "
                f"this needs scope {scope}",
            )
        return who

    check.__name__ = f"needs_{scope}"
    return Depends(check)


#: The least scope of each kind of route.
ASKING, DECIDING, ADMIN = needs(Scope.ASK), needs(Scope.DECIDE), needs(Scope.ADMIN)


def skill_list(svc: Services) -> dict[str, Any]:
    return {
        "items": [
            {
                "name": s.name,
                "description": s.description,
                "model": s.model,
                "servers": sorted(s.mcp_servers),
            }
            for s in svc.ctx.skills.all()
        ],
        "errors": [
            {
                "path": r.error.path,
                "line": r.error.line,
                "message": r.error.message,
                "name": r.error.name,
                "problems": [{"line": p.line, "message": p.message} for p in r.error.problems],
                "kept": r.kept,
            }
            for r in svc.ctx.skills.refused()
        ],
        "watch_seconds": svc.skill_files.interval,
    }


def run_json(run: Run, events: list[Event] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": run.id,
        "skill": run.skill,
        "status": str(run.status),
        "input": run.input,
        "trigger": run.trigger,
        "created_at": run.created_at.isoformat(),
        "updated_at": run.updated_at.isoformat(),
        "started_at": run.started_at.isoformat() if run.started_at else None,
        "finished_at": run.finished_at.isoformat() if run.finished_at else None,
        "result": run.result,
        "error": run.error,
        "usage": asdict(run.usage),
        "killed_by": run.killed_by,
    }
    if events is not None:
        out["events"] = [
            {"seq": e.seq, "kind": str(e.kind), "at": e.at.isoformat(), "data": e.data}
            for e in events
        ]
    return out


def item_json(item: Item) -> dict[str, Any]:
    server, _, _ = (item.tool or "").partition(".")
    return {
        "id": item.id,
        "run_id": item.run_id,
        "skill": item.skill,
        "box": str(item.box),
        "kind": str(item.kind),
        "status": str(item.status),
        "title": item.title,
        "body": item.body,
        "created_at": item.created_at.isoformat(),
        "tool": item.tool,
        "server": server or None,
        "args": item.args,
        "schema": item.schema,
        "risk": item.risk.as_dict(),
        "decided_by": item.decided_by,
        "decided_via": item.decided_via,
        "decided_at": item.decided_at.isoformat() if item.decided_at else None,
        "final_args": item.final_args,
        "reason": item.reason,
        "read_at": item.read_at.isoformat() if item.read_at else None,
        "grants": list(item.risk.grants) if item.status is ItemStatus.PENDING else [],
        "version": item.version,
        "digest": card_digest(item),
        "requested_by": item.requested_by,
    }


class StartRun(BaseModel):
    skill: str
    input: str = ""


#: A grant asked for with an approval: "run", a duration the tool offers ("1h"), "exact".
GrantChoice = Annotated[str | None, Field(max_length=32)]


#: The digest of the card the decision was made on (an item's `digest`): a decision whose
#: card no longer shows the item is refused (409) instead of counting for what changed.
Seen = Annotated[str | None, Field(default=None, max_length=64, pattern=r"^[0-9a-fA-F]+$")]


class ApproveIn(BaseModel):
    decision: Literal["approve"]
    args: dict[str, Any] | None = None
    reason: str | None = Field(default=None, max_length=4000)
    grant: GrantChoice = None
    seen: Seen = None


class EditIn(BaseModel):
    decision: Literal["edit"]
    args: dict[str, Any]  # checked against the tool's schema: 422 names what is wrong
    reason: str | None = Field(default=None, max_length=4000)
    grant: GrantChoice = None  # refused: a grant goes with approve
    seen: Seen = None


class RejectIn(BaseModel):
    decision: Literal["reject"]
    args: dict[str, Any] | None = None
    reason: str | None = Field(default=None, max_length=4000)
    grant: GrantChoice = None  # refused: a grant goes with approve
    seen: Seen = None


DecisionIn = Annotated[ApproveIn | EditIn | RejectIn, Field(discriminator="decision")]


class MessageIn(BaseModel):
    text: str = Field(min_length=1)


class KillIn(BaseModel):
    #: Why: what every held request's agent and every refused decision is told.
    reason: str | None = Field(default=None, max_length=500)


def allowed_methods(app: FastAPI, scope: Any) -> list[str]:
    """Every method some route of this path takes (Starlette's 405 names only one route's)."""
    methods: set[str] = set()
    for route in app.router.routes:
        if isinstance(route, Route) and route.methods and route.matches(scope)[0] is not Match.NONE:
            methods |= route.methods
    return sorted(methods)


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> Response:
        if exc.status_code == 405:
            allow = ", ".join(allowed_methods(app, request.scope))
            exc = StarletteHTTPException(405, exc.detail, {**(exc.headers or {}), "Allow": allow})
        return await http_exception_handler(request, exc)

    @app.exception_handler(NotFound)
    async def _nf(_: Request, exc: NotFound) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, 404)

    @app.exception_handler(AlreadyDecided)
    async def _ad(_: Request, exc: AlreadyDecided) -> JSONResponse:
        it = exc.item
        return JSONResponse(
            {
                "detail": {
                    "message": str(exc),
                    "status": str(it.status),
                    "decided_by": it.decided_by,
                    "decided_via": it.decided_via,
                    "decided_at": it.decided_at.isoformat() if it.decided_at else None,
                }
            },
            409,
        )

    @app.exception_handler(CardChanged)
    async def _cc(_: Request, exc: CardChanged) -> JSONResponse:
        return JSONResponse(
            {
                "detail": {
                    "message": str(exc),
                    "version": exc.item.version,
                    "digest": card_digest(exc.item),
                    "args": exc.item.args,
                }
            },
            409,
        )

    @app.exception_handler(Conflict)
    async def _cf(_: Request, exc: Conflict) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, 409)

    @app.exception_handler(InvalidArguments)
    async def _ia(_: Request, exc: InvalidArguments) -> JSONResponse:
        return JSONResponse({"detail": {"message": str(exc), "errors": exc.errors}}, 422)

    @app.exception_handler(NotAllowed)
    async def _na(_: Request, exc: NotAllowed) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, 403)


class _JsonBody(Request):
    """A request whose JSON body has only numbers JSON has, each finite and of a size a form
    field takes (`agent.argforms.loads_body`): `NaN`, `Infinity` or `1e500000` anywhere is a
    422 naming its place (`args.amount`), and an integer literal of thousands of digits (which
    `int` refuses past 4,300) is too, not the bare 400 FastAPI gives for any other exception
    while parsing."""

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
    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handle = super().get_route_handler()

        async def handler(request: Request) -> Response:
            return await handle(_JsonBody(request.scope, request.receive))

        return handler


def router() -> APIRouter:
    api = APIRouter(
        prefix="/api",
        route_class=BoundedJsonRoute,
        dependencies=[Depends(caller)],
        responses=errors(401, 403, 422),
    )
    with_body = errors(400, 408, 413)

    @api.post(
        "/runs",
        status_code=201,
        response_model=out.RunOut,
        responses={**with_body, **errors(404, 409)},
    )
    async def start_run(
        body: StartRun, request: Request, who: Principal = DECIDING
    ) -> dict[str, Any]:
        run = await services(request).runs.start(body.skill, body.input, by=who)
        return run_json(run)

    @api.get("/runs", response_model=out.RunList, dependencies=[DECIDING])
    async def list_runs(request: Request, limit: int = Query(100, ge=1, le=1000)) -> dict[str, Any]:
        return {
            "items": [run_json(r) for r in await services(request).store.list_runs(limit=limit)]
        }

    @api.get(
        "/runs/{run_id}",
        response_model=out.RunDetail,
        responses=errors(404),
        dependencies=[DECIDING],
    )
    async def get_run(run_id: str, request: Request) -> dict[str, Any]:
        svc = services(request)
        run = await svc.store.get_run(run_id)
        return run_json(run, await svc.store.events(run_id))

    @api.post("/runs/{run_id}/cancel", response_model=out.RunOut, responses=errors(404, 409))
    async def cancel_run(run_id: str, request: Request, who: Principal = ADMIN) -> dict[str, Any]:
        return run_json(await services(request).runs.cancel(run_id, by=who))

    @api.post(
        "/runs/{run_id}/messages",
        response_model=out.RunOut,
        responses={**with_body, **errors(404, 409)},
    )
    async def follow_up(
        run_id: str, body: MessageIn, request: Request, who: Principal = DECIDING
    ) -> dict[str, Any]:
        return run_json(await services(request).runs.follow_up(run_id, body.text, by=who))

    @api.get("/inbox", response_model=out.ItemList)
    async def inbox(
        request: Request,
        box: Literal["unread", "action"] | None = None,
        all: bool = False,
        who: Principal = DECIDING,
    ) -> dict[str, Any]:
        """The inbox: everything for an admin; for a decide token, what its person may see."""
        svc = services(request)
        items = await svc.store.list_items(box=Box(box) if box else None)
        if not all:
            items = [i for i in items if i.status in {"pending", "unread"}]
        if not who.is_admin:
            items = [i for i in items if svc.access.may_see(who, i)]
        return {"items": [item_json(i) for i in items]}

    @api.get(
        "/items/{item_id}",
        response_model=out.ItemOut,
        responses=errors(404),
        dependencies=[DECIDING],
    )
    async def get_item(item_id: str, request: Request) -> dict[str, Any]:
        return item_json(await services(request).store.get_item(item_id))

    @api.post(
        "/items/{item_id}/decision",
        response_model=out.ItemOut,
        responses={**with_body, **errors(404, 409)},
    )
    async def decide(
        item_id: str, body: DecisionIn, request: Request, who: Principal = DECIDING
    ) -> dict[str, Any]:
        svc = services(request)
        if (await svc.store.get_item(item_id)).box is not Box.ACTION:
            raise Conflict("this item is not an action: there is nothing to decide")
        try:
            decision = decision_from(
                body.decision, args=body.args, reason=body.reason, grant=body.grant
            )
        except ValueError as exc:
            raise InvalidArguments({"grant": str(exc)}) from None
        item = await svc.inbox.decide(item_id, decision, by=who, seen=body.seen)
        return item_json(item)

    @api.post(
        "/items/{item_id}/read",
        response_model=out.ItemOut,
        responses=errors(404),
        dependencies=[DECIDING],
    )
    async def mark_read(item_id: str, request: Request) -> dict[str, Any]:
        return item_json(await services(request).inbox.mark_read(item_id))

    @api.get("/kill", response_model=out.KillState, dependencies=[DECIDING])
    async def kill_state(request: Request) -> dict[str, Any]:
        state = await services(request).store.get_kill()
        return {"on": state is not None, **(state or {})}

    @api.post("/kill", response_model=out.KillOn)
    async def kill(
        request: Request, body: KillIn | None = None, who: Principal = ADMIN
    ) -> dict[str, Any]:
        reason = body.reason if body is not None else None
        killed = await services(request).runs.kill(by=who, reason=reason)
        return {"on": True, "killed": killed}

    @api.delete("/kill", response_model=out.KillOff)
    async def lift(request: Request, who: Principal = ADMIN) -> dict[str, Any]:
        await services(request).runs.lift_kill(by=who)
        return {"on": False}

    @api.get("/status", response_model=out.Status, dependencies=[ADMIN])
    async def status(request: Request) -> dict[str, Any]:
        """What this process does: its worker, the singletons it leads, the kill switch; and
        the deliveries the outbox gave up."""
        svc = services(request)
        leaders = svc.leaders
        dead = await svc.store.dead_letters()
        return {
            "database": svc.store.engine.dialect.name,
            "worker": svc.worker.name if svc.worker is not None else None,
            "leading": sorted(n for n, leader in leaders.items() if leader.leading)
            if svc.store.is_postgres
            else sorted(t.get_name() for t in svc.background if not t.done()),
            "channels": sorted(svc.dispatcher.channels),
            "kill": await svc.store.get_kill() is not None,
            "outbox": {"dead": sum(dead.values()), "dead_by_channel": dead},
        }

    @api.get("/skills", response_model=out.SkillList, dependencies=[DECIDING])
    async def skills(request: Request) -> dict[str, Any]:
        """The skills loaded, and the files refused (each problem with its line)."""
        return skill_list(services(request))

    @api.post("/skills/reload", response_model=out.SkillReload)
    async def reload_skills(request: Request, who: Principal = ADMIN) -> dict[str, Any]:
        """Load the skills folder again now (the server also does on every change)."""
        svc = services(request)
        change = await svc.skill_files.reload(actor=who.actor, channel=who.channel)
        return {
            **skill_list(svc),
            "changes": {
                "added": change.added,
                "changed": change.changed,
                "removed": change.removed,
            },
        }

    @api.get("/audit", response_model=out.AuditList, dependencies=[ADMIN])
    async def audit(request: Request, limit: int = Query(200, ge=1, le=5000)) -> dict[str, Any]:
        entries = await services(request).store.audit_log(limit=limit)
        return {
            "items": [
                {
                    "id": e.id,
                    "at": e.at.isoformat(),
                    "action": e.action,
                    "actor": e.actor,
                    "channel": e.channel,
                    "run_id": e.run_id,
                    "item_id": e.item_id,
                    "detail": e.detail,
                }
                for e in entries
            ]
        }

    return api
