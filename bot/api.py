"""The HTTP API under /api: a bearer token on every call, JSON in and out.

Routes only translate HTTP to the engine's functions (`Runs`, `Inbox`) and the engine's
errors to status codes: 401 no token, 404 not found, 409 conflict (already decided, kill
switch), 422 invalid input. Every answer, errors included, is declared in `bot.api_schema`,
so `/openapi.json` says what the server does. The token itself is checked before any body is
read (`bot.http_guard.TokenGate`); the dependency here declares it in the schema and checks it
again.
"""

from __future__ import annotations

import hmac
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

from agent.errors import AlreadyDecided, Conflict, InvalidArguments, NotAllowed, NotFound
from agent.model import Box, Event, Item, ItemStatus, Run, decision_from
from bot import api_schema as out
from bot.api_schema import errors
from bot.services import Services

bearer = HTTPBearer(auto_error=False)


def services(request: Request) -> Services:
    svc: Services = request.app.state.services
    return svc


def require_token(
    request: Request, creds: HTTPAuthorizationCredentials | None = Depends(bearer)
) -> str:
    svc = services(request)
    if creds is None or not hmac.compare_digest(creds.credentials.encode(), svc.token.encode()):
        raise HTTPException(
            401, "missing or wrong API token", headers={"WWW-Authenticate": "Bearer"}
        )
    return "owner"


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
    }


class StartRun(BaseModel):
    skill: str
    input: str = ""


#: A grant asked for with an approval: "run", a duration the tool offers ("1h"), "exact".
GrantChoice = Annotated[str | None, Field(max_length=32)]


class ApproveIn(BaseModel):
    decision: Literal["approve"]
    args: dict[str, Any] | None = None
    reason: str | None = Field(default=None, max_length=4000)
    grant: GrantChoice = None


class EditIn(BaseModel):
    decision: Literal["edit"]
    args: dict[str, Any]  # checked against the tool's schema: 422 names what is wrong
    reason: str | None = Field(default=None, max_length=4000)
    grant: GrantChoice = None  # refused: a grant goes with approve


class RejectIn(BaseModel):
    decision: Literal["reject"]
    args: dict[str, Any] | None = None
    reason: str | None = Field(default=None, max_length=4000)
    grant: GrantChoice = None  # refused: a grant goes with approve


DecisionIn = Annotated[ApproveIn | EditIn | RejectIn, Field(discriminator="decision")]


class MessageIn(BaseModel):
    text: str = Field(min_length=1)


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
    """A request whose JSON body turns a number Python cannot read (an integer literal of
    thousands of digits: `int` refuses past 4,300) into a JSON error FastAPI answers with 422,
    not into the bare 400 it gives for any other exception while parsing."""

    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            body = await self.body()
            try:
                self._json = json.loads(body)
            except json.JSONDecodeError:
                raise
            except ValueError as exc:
                doc = body.decode("utf-8", "replace")
                raise json.JSONDecodeError(f"a number is out of range ({exc})", doc, 0) from None
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
        dependencies=[Depends(require_token)],
        responses=errors(401, 422),
    )
    with_body = errors(400, 408, 413)

    @api.post(
        "/runs",
        status_code=201,
        response_model=out.RunOut,
        responses={**with_body, **errors(404, 409)},
    )
    async def start_run(body: StartRun, request: Request) -> dict[str, Any]:
        run = await services(request).runs.start(body.skill, body.input, trigger="api")
        return run_json(run)

    @api.get("/runs", response_model=out.RunList)
    async def list_runs(request: Request, limit: int = Query(100, ge=1, le=1000)) -> dict[str, Any]:
        return {
            "items": [run_json(r) for r in await services(request).store.list_runs(limit=limit)]
        }

    @api.get("/runs/{run_id}", response_model=out.RunDetail, responses=errors(404))
    async def get_run(run_id: str, request: Request) -> dict[str, Any]:
        svc = services(request)
        run = await svc.store.get_run(run_id)
        return run_json(run, await svc.store.events(run_id))

    @api.post("/runs/{run_id}/cancel", response_model=out.RunOut, responses=errors(404, 409))
    async def cancel_run(run_id: str, request: Request) -> dict[str, Any]:
        return run_json(await services(request).runs.cancel(run_id, actor="owner", channel="api"))

    @api.post(
        "/runs/{run_id}/messages",
        response_model=out.RunOut,
        responses={**with_body, **errors(404, 409)},
    )
    async def follow_up(run_id: str, body: MessageIn, request: Request) -> dict[str, Any]:
        return run_json(await services(request).runs.follow_up(run_id, body.text, channel="api"))

    @api.get("/inbox", response_model=out.ItemList)
    async def inbox(
        request: Request, box: Literal["unread", "action"] | None = None, all: bool = False
    ) -> dict[str, Any]:
        svc = services(request)
        items = await svc.store.list_items(box=Box(box) if box else None)
        if not all:
            items = [i for i in items if i.status in {"pending", "unread"}]
        return {"items": [item_json(i) for i in items]}

    @api.get("/items/{item_id}", response_model=out.ItemOut, responses=errors(404))
    async def get_item(item_id: str, request: Request) -> dict[str, Any]:
        return item_json(await services(request).store.get_item(item_id))

    @api.post(
        "/items/{item_id}/decision",
        response_model=out.ItemOut,
        responses={**with_body, **errors(403, 404, 409)},
    )
    async def decide(item_id: str, body: DecisionIn, request: Request) -> dict[str, Any]:
        svc = services(request)
        if (await svc.store.get_item(item_id)).box is not Box.ACTION:
            raise Conflict("this item is not an action: there is nothing to decide")
        try:
            decision = decision_from(
                body.decision, args=body.args, reason=body.reason, grant=body.grant
            )
        except ValueError as exc:
            raise InvalidArguments({"grant": str(exc)}) from None
        item = await svc.inbox.decide(item_id, decision, actor="owner", channel="api")
        return item_json(item)

    @api.post("/items/{item_id}/read", response_model=out.ItemOut, responses=errors(404))
    async def mark_read(item_id: str, request: Request) -> dict[str, Any]:
        return item_json(await services(request).inbox.mark_read(item_id))

    @api.get("/kill", response_model=out.KillState)
    async def kill_state(request: Request) -> dict[str, Any]:
        state = await services(request).store.get_kill()
        return {"on": state is not None, **(state or {})}

    @api.post("/kill", response_model=out.KillOn)
    async def kill(request: Request) -> dict[str, Any]:
        killed = await services(request).runs.kill(actor="owner", channel="api")
        return {"on": True, "killed": killed}

    @api.delete("/kill", response_model=out.KillOff)
    async def lift(request: Request) -> dict[str, Any]:
        await services(request).runs.lift_kill(actor="owner", channel="api")
        return {"on": False}

    @api.get("/status", response_model=out.Status)
    async def status(request: Request) -> dict[str, Any]:
        """What this process does: its worker, the singletons it leads, the kill switch."""
        svc = services(request)
        leaders = svc.leaders
        return {
            "database": svc.store.engine.dialect.name,
            "worker": svc.worker.name if svc.worker is not None else None,
            "leading": sorted(n for n, leader in leaders.items() if leader.leading)
            if svc.store.is_postgres
            else sorted(t.get_name() for t in svc.background if not t.done()),
            "channels": sorted(svc.dispatcher.channels),
            "kill": await svc.store.get_kill() is not None,
        }

    @api.get("/skills", response_model=out.SkillList)
    async def skills(request: Request) -> dict[str, Any]:
        """The skills loaded, and the files refused (each problem with its line)."""
        return skill_list(services(request))

    @api.post("/skills/reload", response_model=out.SkillReload)
    async def reload_skills(request: Request) -> dict[str, Any]:
        """Load the skills folder again now (the server also does on every change)."""
        svc = services(request)
        change = await svc.skill_files.reload(actor="owner", channel="api")
        return {
            **skill_list(svc),
            "changes": {
                "added": change.added,
                "changed": change.changed,
                "removed": change.removed,
            },
        }

    @api.get("/audit", response_model=out.AuditList)
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
