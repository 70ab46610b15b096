"""The Undo link in a `notify` FYI's mail: one-time, signed, safe against link scanners.

As a decision link (`pizzabot.channels.email.links`), opening it does nothing: GET shows a
confirm page, and only that page's POST undoes. The link asserts "undo this item, mailed to
this address, until then", signed with the server's mail key; it is put only in the mails of
those who may decide the tool's cards, works once (recorded in the `MailLog`) and expires
with the decision links. The Undo is the recipient's, through `Inbox.undo` as their address
(`pizzabot.agent.undo`), so the policy is asked again when the link is used, a second Undo is
refused, and so is one while the kill switch is on.

    GET  /mail/u/{token}   confirm page
    POST /mail/u/{token}   undo
"""

from __future__ import annotations

import hashlib
import html
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Protocol

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from pizzabot.agent.errors import AlreadyUndone, Conflict, NotAllowed, NotFound
from pizzabot.agent.inbox import Inbox
from pizzabot.agent.model import Item
from pizzabot.agent.policy import EMAIL, Principal, normalize_address
from pizzabot.agent.undo import undo_line
from pizzabot.channels.email.keys import BadSignature, MailKey
from pizzabot.channels.email.link_pages import Page, message_page, page_response
from pizzabot.channels.email.ports import MailLog, MailStore

__all__ = ["UNDO_PATH", "UndoDesk", "undo_link", "undo_routes"]

UNDO_PATH = "/mail/u"
_MAX_TOKEN = 1000
_NOT_USABLE = "Link not usable"


class UndoDesk(Protocol):
    """What the Undo routes need of the server's link desk (`links.LinkDesk`)."""

    key: MailKey
    store: MailStore
    inbox: Inbox
    log: MailLog
    clock: Callable[[], datetime]


def undo_link(
    key: MailKey, item: Item, *, address: str, base_url: str, ttl: float, now: datetime
) -> str:
    """The signed Undo link of `item` for `address`, working for `ttl` seconds from `now`."""
    who = normalize_address(address)
    if who is None:
        raise ValueError("an Undo link is for one plain address")
    expires = int((now + timedelta(seconds=ttl)).timestamp())
    token = key.sign({"i": item.id, "u": 1, "a": who, "e": expires})
    return f"{base_url.rstrip('/')}{UNDO_PATH}/{token}"


def _verified(key: MailKey, token: str, now: datetime) -> tuple[str, str]:
    """(item id, address) of a link the server signed that has not expired; else ValueError
    with what to say."""
    try:
        if len(token) > _MAX_TOKEN:
            raise ValueError
        data = key.load(token)
        item_id, address, expires = str(data["i"]), str(data["a"]), int(data["e"])
        if data.get("u") != 1 or normalize_address(address) != address:
            raise ValueError
    except (BadSignature, ValueError, KeyError, TypeError):
        raise ValueError("this link is not valid") from None
    if now.timestamp() > expires:
        raise ValueError("this link has expired; undo on the web page instead")
    return item_id, address


def _key(token: str) -> str:
    return "undo:" + hashlib.sha256(token.encode()).hexdigest()[:40]


async def _check(desk: UndoDesk, token: str) -> tuple[str, Item]:
    item_id, address = _verified(desk.key, token, desk.clock())
    try:
        item = await desk.store.get_item(item_id)
    except NotFound:
        raise ValueError("this link is not valid") from None
    if item.undo is None:
        raise ValueError("this link is not valid")
    return address, item


async def show(desk: UndoDesk, token: str) -> Page:
    """The confirm page. Opening it undoes nothing."""
    try:
        address, item = await _check(desk, token)
    except ValueError as exc:
        return message_page(410, _NOT_USABLE, str(exc))
    assert item.undo is not None
    if item.undo.state != "offered":
        return message_page(409, "Already undone", undo_line(item.undo))
    e = html.escape
    said = f"<p>{e(item.title)}</p><p>{e(undo_line(item.undo))}</p>"
    ask = f"<p>Undo this as <b>{e(address)}</b>? It runs once.</p>"
    form = f"<form method='post'>{ask}<button type='submit'>Undo</button></form>"
    return Page(200, "Undo?", said + form)


async def submit(desk: UndoDesk, token: str) -> Page:
    try:
        address, item = await _check(desk, token)
    except ValueError as exc:
        return message_page(410, _NOT_USABLE, str(exc))
    key = _key(token)
    if not await desk.log.record_once(key, kind="link", now=desk.clock()):
        return message_page(410, _NOT_USABLE, "this link was already used")
    try:
        done = await desk.inbox.undo(item.id, by=Principal.of(EMAIL, address))
    except AlreadyUndone as exc:
        return message_page(409, "Already undone", str(exc))
    except NotAllowed:
        return message_page(403, "Not allowed", f"{address} may not undo this.")
    except Conflict as exc:  # the kill switch, or the policy: the link may serve later
        await desk.log.release(key)
        return message_page(409, "Not undone", str(exc))
    assert done.undo is not None
    return message_page(200, "Done", undo_line(done.undo))


def undo_routes(router: APIRouter, desk: Callable[[Request], UndoDesk | None]) -> None:
    """Put the Undo link's routes on `router`; `desk` finds the desk (None: no email)."""

    @router.get(UNDO_PATH + "/{token}")
    async def confirm_undo(token: str, request: Request) -> HTMLResponse:
        found = desk(request)
        if found is None:
            return page_response(message_page(404, "Not found", "email is not on here"))
        return page_response(await show(found, token))

    @router.post(UNDO_PATH + "/{token}")
    async def undo(token: str, request: Request) -> HTMLResponse:
        found = desk(request)
        if found is None:
            return page_response(message_page(404, "Not found", "email is not on here"))
        return page_response(await submit(found, token))
