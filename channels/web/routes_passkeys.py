"""Passkeys on the page: add and remove one, sign in with one, confirm a card with one.

The ceremonies themselves are `pizzabot.agent.passkeys.Passkeys`; these routes carry their
options to the browser's `navigator.credentials` (``static/app.js``) and its answers back, as
small JSON answers to form posts. Adding and removing a passkey, and asking to confirm a card, need the
signed-in session and its CSRF token; signing in needs neither, and counts a refused passkey
as a failed login (the same per-address throttle as a wrong token).

A card that needs a passkey (`pizzabot.agent.step_up`) is confirmed by the approve (or edit) form
itself: the script asks `/items/{id}/step-up` for a challenge bound to the card's digest,
has the passkey sign it, and posts the form with the answer (`assertion`, `nonce`), which
`routes_items` hands to `Inbox.decide`. Without JavaScript there is no passkey, and the
inbox refuses the approval and says so.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse, Response

from pizzabot.agent.card_digest import card_digest
from pizzabot.agent.errors import Conflict, NotFound, PasskeyRefused
from pizzabot.agent.passkeys import Passkeys
from pizzabot.channels.web._pages import HEADERS, go, not_found, safe_next
from pizzabot.channels.web.deps import Posted, Visit, Visitor, form_text
from pizzabot.channels.web.routes_login import start_session

__all__ = ["router"]

router = APIRouter()


@router.post("/passkeys/options")
async def register_options(post: Posted) -> Response:
    passkeys = _passkeys(post.visit)
    if passkeys is None:
        return _off()
    return _json(200, await passkeys.register_options(post.visit.by))


@router.post("/passkeys")
async def register(post: Posted) -> Response:
    v = post.visit
    passkeys = _passkeys(v)
    if passkeys is None:
        return _off()
    try:
        key = await passkeys.register(
            v.by,
            nonce=post.text("nonce")[:100],
            credential=post.text("credential"),
            name=post.text("name"),
        )
    except (PasskeyRefused, Conflict) as exc:
        return _json(400, {"error": str(exc)})
    return _json(201, {"id": key.id, "name": key.name})


@router.post("/passkeys/{passkey_id}/delete")
async def remove(passkey_id: str, post: Posted) -> Response:
    v = post.visit
    passkeys = _passkeys(v)
    removed = passkeys is not None and await passkeys.store.remove(
        passkey_id,
        principal=v.by.requester,
        actor=v.by.actor,
        channel=v.by.channel,
        now=datetime.now(UTC),
    )
    if not removed:
        return await not_found(v, "passkey")
    return go(v, "/phone", "passkey_removed")


@router.post("/login/passkey/options")
async def login_options(v: Visitor) -> Response:
    passkeys = _passkeys(v)
    if passkeys is None:
        return _off()
    if wait := v.site.throttle.retry_after(_client(v)):
        return _json(429, {"error": f"too many failed logins: try again in {wait} s"})
    return _json(200, await passkeys.login_options())


@router.post("/login/passkey")
async def login(v: Visitor) -> Response:
    passkeys = _passkeys(v)
    if passkeys is None:
        return _off()
    client = _client(v)
    if wait := v.site.throttle.retry_after(client):
        return _json(429, {"error": f"too many failed logins: try again in {wait} s"})
    form = await v.request.form()
    try:
        who = await passkeys.login(
            nonce=form_text(form, "nonce")[:100],
            credential=form_text(form, "credential"),
            client=client,
        )
    except PasskeyRefused as exc:
        v.site.throttle.failed(client)
        return _json(401, {"error": str(exc)})
    v.site.throttle.succeeded(client)
    target = f"{v.root}{safe_next(form_text(form, 'next')) or '/'}"
    response = _json(200, {"go": target})
    start_session(v, who, response)
    return response


@router.post("/items/{item_id}/step-up")
async def step_up_options(item_id: str, post: Posted) -> Response:
    """A challenge to confirm the card the form showed (its `seen` digest) with a passkey."""
    v = post.visit
    passkeys = _passkeys(v)
    if passkeys is None:
        return _off()
    try:
        item = await v.deps.store.get_item(item_id)
    except NotFound:
        return _json(404, {"error": "no such item"})
    digest = card_digest(item)
    if post.text("seen").strip().lower() != digest:
        return _json(409, {"error": "this card changed: reload the page and look again"})
    if not v.deps.policy.may_decide(v.by, item):
        return _json(403, {"error": "you may not decide this item"})
    try:
        options = await passkeys.step_up_options(v.by, item, digest=digest)
    except PasskeyRefused as exc:
        return _json(400, {"error": str(exc)})
    return _json(200, options)


def _passkeys(v: Visit) -> Passkeys | None:
    phone = v.deps.phone
    return phone.passkeys if phone is not None else None


def _client(v: Visit) -> str:
    return v.request.client.host if v.request.client else "unknown"


def _off() -> JSONResponse:
    return _json(404, {"error": "passkeys are not available at this address of the server"})


def _json(status: int, body: dict[str, Any]) -> JSONResponse:
    return JSONResponse(body, status, headers=HEADERS)
