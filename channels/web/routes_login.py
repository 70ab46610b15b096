"""Logging in and out of the web inbox.

The API token logs in, by the link ``pizzabot serve`` prints or by the form, and so does a
named token of scope decide or admin (an ask token is an agent's, and signs nobody in); it is
swapped at once for a session cookie (HttpOnly, SameSite=Strict, Secure over HTTPS). Failed logins
are throttled per client address; logout ends the session on the server, so a copy of the
cookie stops working too.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

from fastapi import APIRouter
from fastapi.responses import RedirectResponse, Response

from pizzabot.agent.policy import Principal, Scope
from pizzabot.agent.policy.tokens import principal_for
from pizzabot.channels.web._pages import HEADERS, go, page, safe_next
from pizzabot.channels.web._session import COOKIE, MAX_AGE
from pizzabot.channels.web.deps import CHANNEL, Posted, Visit, Visitor, form_text

__all__ = ["router", "start_session"]

router = APIRouter()


@router.get("/login")
async def login_form(v: Visitor) -> Response:
    params = v.request.query_params
    token, next_ = params.get("token"), params.get("next")
    if token is not None:
        return await _login(v, token, next_)
    if v.sid is not None:
        return go(v, safe_next(next_) or "/")
    return await page(v, "login.html", error=None, next=safe_next(next_))


@router.post("/login")
async def login_post(v: Visitor) -> Response:
    form = await v.request.form()
    return await _login(v, form_text(form, "token").strip(), form_text(form, "next"))


@router.post("/logout")
async def logout(post: Posted) -> Response:
    v = post.visit
    assert v.sid is not None  # csrf_ok let it through
    now = datetime.fromtimestamp(v.site.clock(), UTC)
    # A copy of the cookie (another browser, a proxy log) must stop working too.
    expires = now + timedelta(seconds=MAX_AGE + 60)
    await v.deps.ended.end(v.sid, expires_at=expires, now=now)
    if v.deps.live is not None:  # its held asks look again, and are refused
        v.deps.live.ring()
    response = RedirectResponse(f"{v.root}/login?flash=loggedout", 303, headers=HEADERS)
    response.delete_cookie(COOKIE, path=v.root or "/", httponly=True, samesite="strict")
    return response


async def _login(v: Visit, token: str, next_: str | None) -> Response:
    throttle = v.site.throttle
    # The peer address: uvicorn puts a forwarded one here only for the proxies it trusts.
    client = v.request.client.host if v.request.client else "unknown"
    if wait := throttle.retry_after(client):
        # Not checked and not audited: one row said this client was throttled.
        error = f"Too many failed logins from your address. Try again in {_duration(wait)}."
        refusal = await page(v, "login.html", status=429, error=error, next=safe_next(next_))
        refusal.headers["Retry-After"] = str(wait)
        return refusal
    who = await _who(v, token)
    if who is None:
        await _failed(v, client)
        return await page(
            v,
            "login.html",
            status=401,
            error="That is not the API token of this server, nor a token made for you.",
            next=safe_next(next_),
        )
    throttle.succeeded(client)
    if not who.scope.covers(Scope.DECIDE):
        # Right token, wrong kind: an agent's token does not sign a person in.
        await v.deps.store.audit(
            action="web_login_refused",
            actor=who.actor,
            channel=CHANNEL,
            now=datetime.now(UTC),
            detail={"principal": who.describe(), "why": f"a token of scope {who.scope}"},
        )
        return await page(
            v,
            "login.html",
            status=403,
            error=f"This token's scope is {who.scope}: it may only {who.scope.allows()}. "
            "Sign in with the API token, or a decide or admin token.",
            next=safe_next(next_),
        )
    now = datetime.now(UTC)
    detail = {"principal": who.describe()}
    await v.deps.store.audit(
        action="web_login", actor=who.actor, channel=CHANNEL, now=now, detail=detail
    )
    response = RedirectResponse(f"{v.root}{safe_next(next_) or '/'}", 303, headers=HEADERS)
    start_session(v, who, response)
    return response


def start_session(v: Visit, who: Principal, response: Response) -> None:
    """Sign `who` in: `response` sets a new session cookie for them (a token's login, a
    passkey's, `pizzabot.channels.web.routes_passkeys`, or a mail link's,
    `pizzabot.channels.web.routes_mail_login`)."""
    mailed = who.identity if who.kind == "person" else None  # `Principal.by_mail`
    response.set_cookie(
        COOKIE,
        v.sessions.issue(who.token_id, mailed=mailed),
        max_age=MAX_AGE,
        path=v.root or "/",
        httponly=True,
        samesite="strict",
        secure=v.site.secure_cookie,
    )


async def _who(v: Visit, token: str) -> Principal | None:
    """Who signs in with `token`: the owner, a named token in force, or nobody."""
    if v.sessions.token_matches(token):
        return Principal.owner(CHANNEL)
    tokens = v.deps.tokens
    return await principal_for(token, owner_secret="", tokens=tokens, channel=CHANNEL)


async def _failed(v: Visit, client: str) -> None:
    """Audit a wrong token, and once more when it is the one that reaches the limit."""
    store, throttle, now = v.deps.store, v.site.throttle, datetime.now(UTC)
    detail = {"client": client}
    await store.audit(
        action="web_login_failed", actor="unknown", channel=CHANNEL, now=now, detail=detail
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


def _duration(seconds: int) -> str:
    minutes = math.ceil(seconds / 60)
    if seconds < 60:
        return f"{seconds} seconds" if seconds > 1 else "a second"
    return f"{minutes} minutes" if minutes > 1 else "a minute"
