"""The web inbox's routes: plain HTML forms over the engine's public functions.

Every page works without JavaScript (forms post, then redirect to a page that shows the
outcome); `static/live.js` only refreshes a few regions by polling their HTML fragments. The
person holding the API token is the owner: the web channel decides, starts and cancels as
``owner`` via ``web``. Routes translate HTTP to `Inbox`/`Runs` calls and back, nothing more.
"""

from __future__ import annotations

import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import quote

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from starlette.datastructures import FormData

from agent.conversation import derive
from agent.errors import AlreadyDecided, Conflict, InvalidArguments, KillSwitchOn, NotFound
from agent.inbox import Inbox
from agent.model import (
    Approve,
    Box,
    Decision,
    Edit,
    Item,
    ItemKind,
    ItemStatus,
    Reject,
    Run,
)
from agent.runs import Runs
from agent.skills import SkillBook
from agent.store import Store
from channels.web._render import render
from channels.web._session import COOKIE, MAX_AGE, LoginThrottle, SessionEnds, Sessions
from channels.web.forms import FieldView, field_views, read_form
from channels.web.timeline import entries

__all__ = ["WebDeps", "web_router"]

ACTOR = "owner"
CHANNEL = "web"
_MAX_TEXT = 20_000

#: Messages shown after a redirect, chosen by a fixed key so no text from the URL is echoed.
NOTES: dict[str, tuple[str, str]] = {
    "approved": ("Approved. The run goes on.", "ok"),
    "edited": ("Approved with your arguments. The run goes on.", "ok"),
    "rejected": ("Rejected. The agent reads your reason.", "ok"),
    "extended": ("Budget extended. The run goes on.", "ok"),
    "stopped": ("The run will stop.", "ok"),
    "late": ("Someone decided this before you, so your decision was not used.", "warn"),
    "read": ("Marked as read.", "ok"),
    "allread": ("All marked as read.", "ok"),
    "started": ("Run started.", "ok"),
    "cancelled": ("Run cancelled.", "ok"),
    "ended": ("The run had already ended.", "warn"),
    "sent": ("Message sent. The run continues.", "ok"),
    "waiting": ("The run is waiting on a decision: decide that item first.", "warn"),
    "kill": ("The kill switch is on: nothing new starts until it is lifted.", "warn"),
    "empty": ("Write a message first.", "warn"),
    "loggedout": ("Logged out.", "ok"),
}


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


@dataclass(frozen=True)
class _Visit:
    deps: WebDeps
    sessions: Sessions
    sid: str | None
    root: str

    @property
    def csrf(self) -> str:
        return self.sessions.csrf(self.sid) if self.sid else ""


_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


def web_router(
    deps: Callable[[Request], WebDeps],
    *,
    secure_cookie: bool = False,
    clock: Callable[[], float] = time.time,
    login_max_failures: int = 10,
    login_window: float = 300.0,
) -> APIRouter:
    """The web inbox as a router to include at ``/``.

    ``deps`` gives the services for a request (read at request time, so the router can be
    made before the service starts). ``secure_cookie`` marks the session cookie Secure, for a
    page served over HTTPS. A client address with ``login_max_failures`` failed logins within
    ``login_window`` seconds is refused (429) until that window ends.
    """
    r = APIRouter(include_in_schema=False)
    throttle = LoginThrottle(max_failures=login_max_failures, window=login_window, clock=clock)

    async def visit(request: Request) -> _Visit:
        d = deps(request)
        sessions = Sessions(d.token, clock=clock)
        sid = sessions.verify(request.cookies.get(COOKIE))
        if sid is not None and await d.ended.ended(sid):
            sid = None
        return _Visit(d, sessions, sid, str(request.scope.get("root_path", "")).rstrip("/"))

    async def page(
        request: Request, v: _Visit, template: str, *, status: int = 200, **context: Any
    ) -> HTMLResponse:
        note = NOTES.get(request.query_params.get("note", ""))
        kill = await v.deps.store.get_kill() if v.sid else None
        html = render(
            template,
            root=v.root,
            signed_in=v.sid is not None,
            csrf=v.csrf,
            note={"text": note[0], "tone": note[1]} if note else None,
            kill=kill,
            **{"section": "", **context},
        )
        return HTMLResponse(html, status, headers=_HEADERS)

    def fragment(v: _Visit, template: str, **context: Any) -> HTMLResponse:
        return HTMLResponse(render(template, root=v.root, csrf=v.csrf, **context), 200, _HEADERS)

    def go(v: _Visit, path: str, note: str | None = None) -> RedirectResponse:
        sep = "&" if "?" in path else "?"
        target = f"{v.root}{path}{sep}note={note}" if note else f"{v.root}{path}"
        return RedirectResponse(target, 303, headers=_HEADERS)

    async def login_needed(request: Request, v: _Visit) -> Response | None:
        """For a page: None when signed in, else the way to the login form."""
        if v.sid is not None:
            return None
        path = request.url.path
        if v.root and path.startswith(v.root):
            path = path[len(v.root) :]
        here = path + (f"?{request.url.query}" if request.url.query else "")
        if request.headers.get("sec-fetch-site") == "cross-site":
            # A link from Slack or a mail client: a SameSite=Strict cookie is not sent on that
            # first navigation. Loading the same address again from this page sends it.
            return await page(request, v, "bounce.html", target=here)
        return RedirectResponse(
            f"{v.root}/login?next={quote(here, safe='')}", 303, headers=_HEADERS
        )

    async def post_refused(request: Request, v: _Visit) -> Response | None:
        """For a form post: None when signed in and carrying this session's CSRF token."""
        if v.sid is None:
            return await page(
                request,
                v,
                "error.html",
                status=401,
                title="Not logged in",
                message="Your session has ended. Log in again, then repeat what you did.",
            )
        form = await request.form()
        if not v.sessions.csrf_ok(v.sid, _text(form, "csrf")):
            return await page(
                request,
                v,
                "error.html",
                status=403,
                title="Refused",
                message="This form was not sent by this page, or it is out of date. "
                "Go back, reload the page and try again.",
            )
        return None

    async def not_found(request: Request, v: _Visit, what: str) -> HTMLResponse:
        return await page(
            request, v, "error.html", status=404, title="Not found", message=f"No such {what}."
        )

    # -- login --------------------------------------------------------------------------

    async def login_answer(request: Request, v: _Visit, token: str, next_: str | None) -> Response:
        store = v.deps.store
        now = datetime.now(UTC)
        # The peer address: uvicorn puts a forwarded one here only for the proxies it trusts.
        client = request.client.host if request.client else "unknown"
        if wait := throttle.retry_after(client):
            # Not checked and not audited: one row said this client was throttled.
            refusal = await page(
                request,
                v,
                "login.html",
                status=429,
                error=f"Too many failed logins from your address. Try again in {_duration(wait)}.",
                next=_safe_next(next_),
            )
            refusal.headers["Retry-After"] = str(wait)
            return refusal
        if not v.sessions.token_matches(token):
            await store.audit(
                action="web_login_failed",
                actor="unknown",
                channel=CHANNEL,
                now=now,
                detail={"client": client},
            )
            if throttle.failed(client):
                await store.audit(
                    action="web_login_throttled",
                    actor="unknown",
                    channel=CHANNEL,
                    now=now,
                    detail={
                        "client": client,
                        "failures": throttle.max_failures,
                        "retry_after": throttle.retry_after(client),
                    },
                )
            return await page(
                request,
                v,
                "login.html",
                status=401,
                error="That is not the API token of this server.",
                next=_safe_next(next_),
            )
        throttle.succeeded(client)
        await store.audit(action="web_login", actor=ACTOR, channel=CHANNEL, now=now)
        response = RedirectResponse(f"{v.root}{_safe_next(next_) or '/'}", 303, headers=_HEADERS)
        response.set_cookie(
            COOKIE,
            v.sessions.issue(),
            max_age=MAX_AGE,
            path=v.root or "/",
            httponly=True,
            samesite="strict",
            secure=secure_cookie,
        )
        return response

    @r.get("/login")
    async def login_form(request: Request) -> Response:
        v = await visit(request)
        token = request.query_params.get("token")
        next_ = request.query_params.get("next")
        if token is not None:
            return await login_answer(request, v, token, next_)
        if v.sid is not None:
            return go(v, _safe_next(next_) or "/")
        return await page(request, v, "login.html", error=None, next=_safe_next(next_))

    @r.post("/login")
    async def login_post(request: Request) -> Response:
        v = await visit(request)
        form = await request.form()
        return await login_answer(request, v, _text(form, "token").strip(), _text(form, "next"))

    @r.post("/logout")
    async def logout(request: Request) -> Response:
        v = await visit(request)
        if refused := await post_refused(request, v):
            return refused
        assert v.sid is not None  # post_refused let it through
        now = datetime.fromtimestamp(clock(), UTC)
        # A copy of the cookie (another browser, a proxy log) must stop working too.
        expires = now + timedelta(seconds=MAX_AGE + 60)
        await v.deps.ended.end(v.sid, expires_at=expires, now=now)
        response = RedirectResponse(f"{v.root}/login?note=loggedout", 303, headers=_HEADERS)
        response.delete_cookie(COOKIE, path=v.root or "/", httponly=True, samesite="strict")
        return response

    # -- inbox --------------------------------------------------------------------------

    async def boxes(v: _Visit) -> dict[str, Any]:
        store = v.deps.store
        action = await store.list_items(box=Box.ACTION, status=ItemStatus.PENDING)
        unread = await store.list_items(box=Box.UNREAD, status=ItemStatus.UNREAD)
        return {"action": action, "unread": unread}

    @r.get("/")
    async def home(request: Request) -> Response:
        v = await visit(request)
        if redirect := await login_needed(request, v):
            return redirect
        return await page(request, v, "inbox.html", section="inbox", **await boxes(v))

    @r.get("/boxes")
    async def boxes_fragment(request: Request) -> Response:
        v = await visit(request)
        if v.sid is None:
            return Response(status_code=401)
        return fragment(v, "_boxes.html", **await boxes(v))

    @r.post("/items/read-all")
    async def read_all(request: Request) -> Response:
        v = await visit(request)
        if refused := await post_refused(request, v):
            return refused
        for item in await v.deps.store.list_items(box=Box.UNREAD, status=ItemStatus.UNREAD):
            await v.deps.inbox.mark_read(item.id)
        return go(v, "/", "allread")

    # -- items --------------------------------------------------------------------------

    async def item_page(
        request: Request,
        v: _Visit,
        item: Item,
        *,
        views: list[FieldView] | None = None,
        form_error: str | None = None,
        reason: str = "",
        status: int = 200,
    ) -> HTMLResponse:
        store = v.deps.store
        try:
            run: Run | None = await store.get_run(item.run_id)
        except NotFound:
            run = None
        editable = item.kind is ItemKind.TOOL and not item.decided and item.box is Box.ACTION
        if views is None and editable:
            views = field_views(item.schema or {}, item.args)
        server, _, tool = (item.tool or "").partition(".")
        skill = v.deps.skills.get(item.skill) if item.skill in v.deps.skills else None
        return await page(
            request,
            v,
            "item.html",
            status=status,
            section="inbox",
            item=item,
            run=run,
            skill=skill,
            server=server,
            tool=tool,
            pending=item.box is Box.ACTION and item.status is ItemStatus.PENDING,
            views=views or [],
            form_error=form_error,
            edit_open=form_error is not None or any(f.error for f in views or []),
            reason=reason,
            deliveries=await store.deliveries(item.id),
        )

    @r.get("/items/{item_id}")
    async def item_get(item_id: str, request: Request) -> Response:
        v = await visit(request)
        if redirect := await login_needed(request, v):
            return redirect
        try:
            item = await v.deps.store.get_item(item_id)
        except NotFound:
            return await not_found(request, v, "item")
        return await item_page(request, v, item)

    @r.get("/items/{item_id}/state")
    async def item_state(item_id: str, request: Request) -> Response:
        v = await visit(request)
        if v.sid is None:
            return Response(status_code=401)
        try:
            item = await v.deps.store.get_item(item_id)
        except NotFound:
            return Response(status_code=404)
        return fragment(v, "_item_state.html", item=item)

    async def decide(
        request: Request, item_id: str, make: Callable[[FormData], Decision]
    ) -> Response:
        v = await visit(request)
        if refused := await post_refused(request, v):
            return refused
        decision = make(await request.form())
        try:
            item = await v.deps.inbox.decide(item_id, decision, actor=ACTOR, channel=CHANNEL)
        except NotFound:
            return await not_found(request, v, "item")
        except AlreadyDecided:
            return go(v, f"/items/{item_id}", "late")
        except InvalidArguments as exc:
            item = await v.deps.store.get_item(item_id)
            return await item_page(request, v, item, form_error=_joined(exc.errors), status=422)
        budget = item.kind is ItemKind.BUDGET
        if isinstance(decision, Approve):
            return go(v, f"/items/{item_id}", "extended" if budget else "approved")
        return go(v, f"/items/{item_id}", "stopped" if budget else "rejected")

    @r.post("/items/{item_id}")
    async def item_post(item_id: str, request: Request) -> Response:
        """The item page's three forms post to the page's own address (``decision`` says
        which), so a refused edit comes back as a 422 carrying the typed input and the errors
        at ``/items/{id}``: the address a reload, a bookmark or a copied link shows correctly.
        The ``/approve``, ``/edit`` and ``/reject`` addresses stay for pages loaded before."""
        v = await visit(request)
        if refused := await post_refused(request, v):
            return refused
        match _text(await request.form(), "decision"):
            case "approve":
                return await approve(item_id, request)
            case "edit":
                return await edit(item_id, request)
            case "reject":
                return await reject(item_id, request)
            case _:
                return await page(
                    request,
                    v,
                    "error.html",
                    status=400,
                    title="Unknown decision",
                    message="Go back, reload the page and choose approve, edit or reject.",
                )

    @r.post("/items/{item_id}/approve")
    async def approve(item_id: str, request: Request) -> Response:
        return await decide(request, item_id, lambda _form: Approve())

    @r.post("/items/{item_id}/reject")
    async def reject(item_id: str, request: Request) -> Response:
        return await decide(
            request, item_id, lambda form: Reject(_text(form, "reason").strip()[:4000])
        )

    @r.post("/items/{item_id}/edit")
    async def edit(item_id: str, request: Request) -> Response:
        v = await visit(request)
        if refused := await post_refused(request, v):
            return refused
        try:
            item = await v.deps.store.get_item(item_id)
        except NotFound:
            return await not_found(request, v, "item")
        if item.decided:
            return go(v, f"/items/{item_id}", "late")
        schema = item.schema or {}
        args, errors, raw = read_form(schema, await request.form())
        if errors:
            views = field_views(schema, item.args, raw=raw, errors=errors)
            general = errors.get("")
            return await item_page(
                request,
                v,
                item,
                views=views,
                form_error=general or "Some fields need a fix; see below.",
                status=422,
            )
        try:
            await v.deps.inbox.decide(item_id, Edit(args), actor=ACTOR, channel=CHANNEL)
        except AlreadyDecided:
            return go(v, f"/items/{item_id}", "late")
        except InvalidArguments as exc:
            views = field_views(schema, item.args, raw=raw, errors=exc.errors)
            return await item_page(
                request, v, item, views=views, form_error=_joined(exc.errors), status=422
            )
        return go(v, f"/items/{item_id}", "edited")

    @r.post("/items/{item_id}/read")
    async def mark_read(item_id: str, request: Request) -> Response:
        v = await visit(request)
        if refused := await post_refused(request, v):
            return refused
        try:
            await v.deps.inbox.mark_read(item_id)
        except NotFound:
            return await not_found(request, v, "item")
        back = _safe_next(_text(await request.form(), "next")) or f"/items/{item_id}"
        return go(v, back, "read")

    # -- runs ---------------------------------------------------------------------------

    @r.get("/runs")
    async def runs_list(request: Request) -> Response:
        v = await visit(request)
        if redirect := await login_needed(request, v):
            return redirect
        runs = await v.deps.store.list_runs(limit=200)
        return await page(request, v, "runs.html", section="runs", runs=runs)

    async def new_run_page(
        request: Request,
        v: _Visit,
        *,
        error: str | None = None,
        chosen: str = "",
        text: str = "",
        status: int = 200,
    ) -> HTMLResponse:
        return await page(
            request,
            v,
            "new_run.html",
            status=status,
            section="new",
            skills=v.deps.skills.all(),
            error=error,
            chosen=chosen or request.query_params.get("skill", ""),
            text=text,
        )

    @r.get("/runs/new")
    async def new_run(request: Request) -> Response:
        v = await visit(request)
        if redirect := await login_needed(request, v):
            return redirect
        return await new_run_page(request, v)

    @r.post("/runs")
    async def start_run(request: Request) -> Response:
        v = await visit(request)
        if refused := await post_refused(request, v):
            return refused
        form = await request.form()
        skill, text = _text(form, "skill").strip(), _text(form, "input")[:_MAX_TEXT]
        try:
            run = await v.deps.runs.start(skill, text, trigger=CHANNEL, actor=ACTOR)
        except NotFound:
            return await new_run_page(
                request, v, error="Pick one of the skills.", text=text, status=422
            )
        except KillSwitchOn as exc:
            return await new_run_page(
                request, v, error=str(exc), chosen=skill, text=text, status=409
            )
        return go(v, f"/runs/{run.id}", "started")

    async def run_context(v: _Visit, run_id: str) -> dict[str, Any]:
        store = v.deps.store
        run = await store.get_run(run_id)
        events = await store.events(run_id)
        items = await store.list_items(run_id=run_id)
        return {
            "run": run,
            "usage": derive(events).usage if events else run.usage,
            "entries": entries(events),
            "waiting_on": [i for i in items if i.status is ItemStatus.PENDING],
        }

    @r.get("/runs/{run_id}")
    async def run_get(run_id: str, request: Request) -> Response:
        v = await visit(request)
        if redirect := await login_needed(request, v):
            return redirect
        try:
            context = await run_context(v, run_id)
        except NotFound:
            return await not_found(request, v, "run")
        return await page(request, v, "run.html", section="runs", **context)

    @r.get("/runs/{run_id}/live")
    async def run_live(run_id: str, request: Request) -> Response:
        v = await visit(request)
        if v.sid is None:
            return Response(status_code=401)
        try:
            context = await run_context(v, run_id)
        except NotFound:
            return Response(status_code=404)
        return fragment(v, "_run_live.html", **context)

    @r.post("/runs/{run_id}/cancel")
    async def cancel(run_id: str, request: Request) -> Response:
        v = await visit(request)
        if refused := await post_refused(request, v):
            return refused
        try:
            await v.deps.runs.cancel(run_id, actor=ACTOR, channel=CHANNEL)
        except NotFound:
            return await not_found(request, v, "run")
        except Conflict:
            return go(v, f"/runs/{run_id}", "ended")
        return go(v, f"/runs/{run_id}", "cancelled")

    @r.post("/runs/{run_id}/messages")
    async def follow_up(run_id: str, request: Request) -> Response:
        v = await visit(request)
        if refused := await post_refused(request, v):
            return refused
        text = _text(await request.form(), "text").strip()[:_MAX_TEXT]
        if not text:
            return go(v, f"/runs/{run_id}", "empty")
        try:
            await v.deps.runs.follow_up(run_id, text, actor=ACTOR, channel=CHANNEL)
        except NotFound:
            return await not_found(request, v, "run")
        except KillSwitchOn:
            return go(v, f"/runs/{run_id}", "kill")
        except Conflict:
            return go(v, f"/runs/{run_id}", "waiting")
        return go(v, f"/runs/{run_id}", "sent")

    # -- audit --------------------------------------------------------------------------

    @r.get("/audit")
    async def audit(request: Request) -> Response:
        v = await visit(request)
        if redirect := await login_needed(request, v):
            return redirect
        log = await v.deps.store.audit_log(limit=500)
        return await page(request, v, "audit.html", section="audit", entries=log)

    # -- schedules ----------------------------------------------------------------------

    @r.get("/schedules")
    async def schedules(request: Request) -> Response:
        v = await visit(request)
        if redirect := await login_needed(request, v):
            return redirect
        listing = await v.deps.schedules() if v.deps.schedules else {"items": [], "errors": []}
        return await page(
            request,
            v,
            "schedules.html",
            section="schedules",
            schedules=listing["items"],
            problems=listing["errors"],
        )

    return r


def _text(form: FormData, name: str) -> str:
    value = form.get(name)
    return value if isinstance(value, str) else ""


def _safe_next(value: str | None) -> str | None:
    """A path on this site to go back to; anything else (another host, a scheme) is dropped."""
    if not value or not value.startswith("/") or value.startswith(("//", "/\\")):
        return None
    if any(c in value for c in "\r\n\\"):
        return None
    return value


def _duration(seconds: int) -> str:
    minutes = math.ceil(seconds / 60)
    if seconds < 60:
        return f"{seconds} seconds" if seconds > 1 else "a second"
    return f"{minutes} minutes" if minutes > 1 else "a minute"


def _joined(errors: dict[str, str]) -> str:
    return "; ".join(f"{k}: {v}" if k else v for k, v in errors.items())
