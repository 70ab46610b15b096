"""The page as a phone's app: installable, notified by Web Push, readable on a flaky connection.

- `/manifest.webmanifest` and `/sw.js` make the page installable (a web app manifest and a
  service worker). The service worker keeps only the shell (styles, scripts, icons, the
  offline page) for a flaky connection: every page with a card on it comes from the server,
  so nothing of a card outlives a logout or reaches the next person on the device.
- `/phone` is where a person turns notifications on for this browser, sees and removes the
  browsers that get them, and manages passkeys (`routes_passkeys`).
- `/push/subscriptions` keeps the browser's `PushSubscription` under the signed-in principal.
- `/push/open/{id}` turns the opaque id a push carries into the card, once signed in. A
  notification's "Approve" or "Reject" lands here too, and only opens the card with that
  choice offered: a notification click never decides anything by itself.
"""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from fastapi import APIRouter
from fastapi.responses import FileResponse, JSONResponse, Response

from pizzabot.agent.context import new_id
from pizzabot.agent.devices import Subscription
from pizzabot.agent.errors import NotFound
from pizzabot.agent.model import Box, ItemStatus
from pizzabot.channels.web._pages import HEADERS, go, not_found, page
from pizzabot.channels.web._render import STATIC
from pizzabot.channels.web.deps import Posted, SignedIn, Visit, Visitor
from pizzabot.channels.web.phone import PhoneDeps

__all__ = ["router"]

router = APIRouter()

#: The choices a notification's buttons may carry to the card's page.
CHOICES = ("approve", "reject")
#: The longest subscription the page accepts (an endpoint URL and two keys).
_MAX_SUBSCRIPTION = 4000


@router.get("/manifest.webmanifest")
async def manifest(v: Visitor) -> Response:
    root = v.root
    body = {
        "name": "Pizza Bot",
        "short_name": "Pizza Bot",
        "description": "Approve, edit or reject what your agents want to do.",
        "id": f"{root}/",
        "start_url": f"{root}/",
        "scope": f"{root}/",
        "display": "standalone",
        "background_color": "#fffaf3",
        "theme_color": "#b5361d",
        "icons": [
            {"src": f"{root}/static/icon-192.png", "sizes": "192x192", "type": "image/png"},
            {"src": f"{root}/static/icon-512.png", "sizes": "512x512", "type": "image/png"},
            {
                "src": f"{root}/static/icon-512.png",
                "sizes": "512x512",
                "type": "image/png",
                "purpose": "maskable",
            },
        ],
    }
    headers = {**HEADERS, "Cache-Control": "no-cache"}
    return JSONResponse(body, headers=headers, media_type="application/manifest+json")


@router.get("/sw.js")
async def service_worker() -> Response:
    # Served from the top so that it may control every page; re-checked on each visit.
    headers = {**HEADERS, "Cache-Control": "no-cache"}
    return FileResponse(STATIC / "sw.js", media_type="text/javascript", headers=headers)


@router.get("/offline")
async def offline(v: Visitor) -> Response:
    # The service worker keeps this page: drawn as for nobody, it holds no session's token.
    return await page(replace(v, sid=None, who=None), "offline.html")


@router.get("/phone")
async def phone_page(v: SignedIn) -> Response:
    phone = v.deps.phone
    subs = await _visible(v, phone) if phone is not None else []
    passkeys = phone.passkeys if phone is not None else None
    keys = await passkeys.store.list_passkeys(v.by.requester) if passkeys is not None else []
    return await page(
        v,
        "phone.html",
        section="phone",
        push_key=phone.vapid_key if phone is not None else "",
        subscriptions=subs,
        passkeys_on=passkeys is not None,
        passkeys=keys,
        mine=v.by.requester,
    )


@router.post("/push/subscriptions")
async def subscribe(post: Posted) -> Response:
    v = post.visit
    phone = v.deps.phone
    if phone is None or not phone.vapid_key:
        return _json(404, {"error": "this server sends no push notifications"})
    given = post.text("subscription")
    parsed = _subscription(given, phone) if len(given) <= _MAX_SUBSCRIPTION else None
    if parsed is None:
        return _json(422, {"error": "that is not a push subscription"})
    endpoint, p256dh, auth = parsed
    sub = Subscription(
        id=new_id(),
        endpoint=endpoint,
        p256dh=p256dh,
        auth=auth,
        principal=v.by.requester,
        label=" ".join(post.text("label").split())[:80] or "a browser",
        created_at=datetime.now(UTC),
    )
    kept = await phone.subscriptions.add(sub, actor=v.by.actor, channel=v.by.channel)
    return _json(201, {"id": kept.id})


@router.post("/push/subscriptions/{sub_id}/delete")
async def unsubscribe(sub_id: str, post: Posted) -> Response:
    v = post.visit
    phone = v.deps.phone
    sub = await phone.subscriptions.get(sub_id) if phone is not None else None
    if phone is None or sub is None or not _may_manage(v, sub):
        return await not_found(v, "subscription")
    await phone.subscriptions.remove(
        sub_id,
        actor=v.by.actor,
        channel=v.by.channel,
        why="removed on the page",
        now=datetime.now(UTC),
    )
    return go(v, "/phone", "unsubscribed")


@router.get("/push/open/{opaque}")
async def open_push(opaque: str, v: SignedIn) -> Response:
    phone = v.deps.phone
    item_id = await phone.subscriptions.item_of(opaque[:64]) if phone is not None else None
    if item_id is None:
        return await not_found(v, "notification")
    try:
        item = await v.deps.store.get_item(item_id)
    except NotFound:
        return await not_found(v, "notification")
    if not v.by.is_admin and not v.deps.policy.may_see(v.by, item):
        return await not_found(v, "notification")
    choice = v.request.query_params.get("act", "")
    pending = item.box is Box.ACTION and item.status is ItemStatus.PENDING
    if choice in CHOICES and pending:
        return go(v, f"/items/{item.id}?confirm={choice}#decide")
    return go(v, f"/items/{item.id}")


async def _visible(v: Visit, phone: PhoneDeps) -> list[Subscription]:
    """The subscriptions the visitor may see: their own; an admin sees everyone's."""
    if v.by.is_admin:
        return await phone.subscriptions.list_subscriptions()
    return await phone.subscriptions.list_subscriptions(v.by.requester)


def _may_manage(v: Visit, sub: Subscription) -> bool:
    return v.by.is_admin or sub.principal == v.by.requester


def _subscription(text: str, phone: PhoneDeps) -> tuple[str, str, str] | None:
    """A `PushSubscription.toJSON()`: its https endpoint (plain http only on loopback, where
    the server allows that) and its keys."""
    try:
        data: Any = json.loads(text)
        endpoint, keys = data["endpoint"], data["keys"]
        p256dh, auth = keys["p256dh"], keys["auth"]
    except (ValueError, KeyError, TypeError):
        return None
    if not all(isinstance(x, str) and x for x in (endpoint, p256dh, auth)):
        return None
    loopback = endpoint.startswith(("http://127.0.0.1:", "http://localhost:"))
    if not endpoint.startswith("https://") and not (loopback and phone.loopback_push):
        return None
    if len(p256dh) > 200 or len(auth) > 100 or any(c in endpoint for c in "\r\n "):
        return None
    return endpoint, p256dh, auth


def _json(status: int, body: dict[str, Any]) -> JSONResponse:
    return JSONResponse(body, status, headers=HEADERS)
