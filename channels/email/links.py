"""One-time decision links in item mails, safe against link scanners.

Mail security gateways (and some clients' previews) open every link in a mail. So a link
never decides by being opened: GET shows a confirm page, and only that page's POST decides.

A link asserts "this item, as this mail showed it, this decision, mailed to this address,
until then", signed with the server's mail key (`keys.MailKey`), which never leaves the server: nothing in any
mail lets its reader make another link, for another person, decision or expiry. Links are
put only in the mails of the item's email approvers, expire after `link_ttl` (a day by
default), and work once (used links are recorded in the `MailLog`). The decision is the
mail recipient's, made through `Inbox.decide(..., channel="email")`, so the policy
(`pizzabot.agent.policy.Access`) is asked again when the link is used, and the card's digest
(`pizzabot.agent.card_digest`) binds the decision to the arguments the mail showed: after an edit,
an old mail's link is refused and the thread gets the new card. `pizzabot.bot.wire_email` mounts the
routes only when the server has a public URL to put in links.

    GET  /mail/d/{token}   confirm page (a form: button, reason, or the edit fields)
    POST /mail/d/{token}   decide
"""

from __future__ import annotations

import hashlib
import html
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from pizzabot.agent.argforms import Field, coerce_form, field_path, form_fields
from pizzabot.agent.card_digest import card_digest, seen_matches
from pizzabot.agent.context import utcnow
from pizzabot.agent.errors import (
    AlreadyApproved,
    AlreadyDecided,
    CardChanged,
    InvalidArguments,
    KillSwitchOn,
    NotAllowed,
    NotFound,
    StepUpRequired,
)
from pizzabot.agent.inbox import Inbox
from pizzabot.agent.model import Box, Item, ItemKind, decision_from
from pizzabot.agent.policy import EMAIL, Principal, normalize_address
from pizzabot.channels.email.compose import Links, outcome_text
from pizzabot.channels.email.keys import BadSignature, MailKey
from pizzabot.channels.email.link_pages import Page, message_page, page_response
from pizzabot.channels.email.ports import MailLog, MailStore
from pizzabot.channels.email.undo_links import undo_routes

PATH = "/mail/d"
DECISIONS = ("approve", "reject", "edit")
MAX_TOKEN = 1000


_CHANGED = (
    "The call was changed after this mail was sent, so this link no longer decides it. "
    "The newest mail in the thread (or the web page) shows it as it is now."
)


class BadLink(Exception):
    """The link is malformed, forged, expired or used."""


@dataclass(frozen=True)
class LinkAssertion:
    item_id: str
    decision: str
    address: str
    expires: int  # unix seconds
    #: The digest of the card the mail showed.
    seen: str | None = None


def sign_link(key: MailKey, item: Item, *, decision: str, address: str, expires: datetime) -> str:
    who = normalize_address(address)
    if decision not in DECISIONS or who is None:
        raise ValueError("a link is for one decision and one plain address")
    asserted = {"i": item.id, "d": decision, "a": who, "e": int(expires.timestamp())}
    return key.sign({**asserted, "s": card_digest(item)})


def verify_link(key: MailKey, token: str, *, now: datetime) -> LinkAssertion:
    """What a link asserts the server signed and that has not expired; else `BadLink`."""
    if len(token) > MAX_TOKEN:
        raise BadLink("this link is not valid")
    try:
        data = key.load(token)
        seen = data.get("s")
        asserted = LinkAssertion(
            str(data["i"]),
            str(data["d"]),
            str(data["a"]),
            int(data["e"]),
            str(seen) if seen is not None else None,
        )
    except (BadSignature, ValueError, KeyError, TypeError):
        raise BadLink("this link is not valid") from None
    if (
        asserted.decision not in DECISIONS
        or normalize_address(asserted.address) != asserted.address
    ):
        raise BadLink("this link is not valid")
    if now.timestamp() > asserted.expires:
        raise BadLink("this link has expired; reply to the mail instead")
    return asserted


def link_key(token: str) -> str:
    return "link:" + hashlib.sha256(token.encode()).hexdigest()[:40]


def make_links(
    key: MailKey, item: Item, *, address: str, base_url: str, ttl: float, now: datetime
) -> Links:
    expires = now + timedelta(seconds=ttl)
    base = base_url.rstrip("/") + PATH

    def url(decision: str) -> str:
        token = sign_link(key, item, decision=decision, address=address, expires=expires)
        return f"{base}/{token}"

    edit = url("edit") if item.kind is ItemKind.TOOL else None
    page = f"{base_url.rstrip('/')}/items/{item.id}"
    if item.risk.step_up is not None:
        # Approved only with a passkey, on the web page: a link alone cannot
        # (`pizzabot.agent.step_up`).
        return Links(approve=page, reject=url("reject"), edit=page, expires=expires, page=page)
    return Links(
        approve=url("approve"), reject=url("reject"), edit=edit, expires=expires, page=page
    )


# --- the pages ---------------------------------------------------------------------------


def _input(f: Field, error: str | None) -> str:
    e = html.escape
    name = e(f.name)
    hint = f"<div class='hint'>{e(f.description)}</div>" if f.description else ""
    err = f"<div class='err'>{e(error)}</div>" if error else ""
    label = f"<label for='{name}'>{e(f.label)}{'' if f.required else ' (optional)'}</label>"
    value = "" if f.value is None or isinstance(f.value, bool) else str(f.value)
    if f.kind == "checkbox":
        checked = " checked" if f.value is True else ""
        control = (
            f"<input type='hidden' name='{name}' value='false'>"
            f"<label><input type='checkbox' name='{name}' value='true'{checked}> "
            f"{e(f.label)}</label>"
        )
        return control + hint + err
    if f.kind == "select":
        options = [] if f.required and not f.nullable else ["<option value=''></option>"]
        for option in f.options:
            selected = " selected" if option == value else ""
            options.append(f"<option{selected}>{e(option)}</option>")
        control = f"<select id='{name}' name='{name}'>{''.join(options)}</select>"
    elif f.kind in {"textarea", "json"}:
        control = f"<textarea id='{name}' name='{name}' rows='6'>{e(value)}</textarea>"
    else:
        kind = "number" if f.kind in {"number", "integer"} else "text"
        step = " step='1'" if f.kind == "integer" else " step='any'" if kind == "number" else ""
        control = f"<input id='{name}' type='{kind}'{step} name='{name}' value='{e(value)}'>"
    return label + control + hint + err


def _summary(item: Item) -> str:
    e = html.escape
    rows = "".join(
        f"<tr><td><code>{e(k)}</code></td><td><pre>{e(v if isinstance(v, str) else json.dumps(v))}</pre></td></tr>"
        for k, v in (item.args or {}).items()
    )
    return f"<p>{e(item.title)}</p><pre>{e(item.body.strip())}</pre>" + (
        f"<table>{rows}</table>" if rows else ""
    )


class LinkDesk:
    """Behind the link routes: checks a link, shows its confirm page, makes its decision."""

    def __init__(
        self,
        *,
        store: MailStore,
        inbox: Inbox,
        log: MailLog,
        key: MailKey,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self.key = key
        self.store = store
        self.inbox = inbox
        self.log = log
        self.clock = clock

    async def _check(self, token: str) -> tuple[LinkAssertion, Item]:
        asserted = verify_link(self.key, token, now=self.clock())
        try:
            item = await self.store.get_item(asserted.item_id)
        except NotFound:
            raise BadLink("this link is not valid") from None
        if item.box is not Box.ACTION:
            raise BadLink("this link is not valid")
        if await self.log.seen(link_key(token)):
            raise BadLink("this link was already used")
        return asserted, item

    def _form(
        self,
        asserted: LinkAssertion,
        item: Item,
        errors: dict[str, str] | None = None,
        values: dict[str, Any] | None = None,
    ) -> Page:
        e = html.escape
        parts = [_summary(item)]
        if asserted.decision == "approve":
            label = "Approve"
            parts.append(f"<p>Approve this as <b>{e(asserted.address)}</b>?</p>")
        elif asserted.decision == "reject":
            label = "Reject"
            parts.append(
                "<label for='reason'>Reason (the agent reads it)</label>"
                "<textarea id='reason' name='reason' rows='4'></textarea>"
            )
        else:
            label = "Save and approve"
            fields = form_fields(
                item.schema or {}, values if values is not None else item.args or {}
            )
            errors = errors or {}
            if "" in errors:
                parts.append(f"<p class='err'>{e(errors[''])}</p>")
            parts += [_input(f, errors.get(f.name)) for f in fields]
        parts_html = "".join(parts[1:])
        form = f"<form method='post'>{parts_html}<button type='submit'>{e(label)}</button></form>"
        title = {"approve": "Approve?", "reject": "Reject?", "edit": "Edit and approve"}
        return Page(200, title[asserted.decision], parts[0] + form)

    async def show(self, token: str) -> Page:
        """The confirm page. Opening it decides nothing."""
        try:
            asserted, item = await self._check(token)
        except BadLink as exc:
            return message_page(410, "Link not usable", str(exc))
        if item.decided:
            return message_page(409, "Already decided", outcome_text(item))
        if not seen_matches(item, asserted.seen):
            return message_page(409, "This card changed", _CHANGED)
        return self._form(asserted, item)

    async def submit(self, token: str, form: dict[str, str]) -> Page:
        try:
            asserted, item = await self._check(token)
        except BadLink as exc:
            return message_page(410, "Link not usable", str(exc))
        args: dict[str, Any] | None = None
        if asserted.decision == "edit":
            fields = form_fields(item.schema or {}, item.args or {})
            raw: dict[str, str | bool | None] = {f.name: form.get(f.name) for f in fields}
            args, errors = coerce_form(item.schema or {}, raw)
            if errors:
                return self._form(asserted, item, errors, values=_as_values(raw))
        key = link_key(token)
        if not await self.log.record_once(key, kind="link", now=self.clock()):
            return message_page(410, "Link not usable", "this link was already used")
        decision = decision_from(asserted.decision, args=args, reason=form.get("reason", ""))
        try:
            decided = await self.inbox.decide(
                item.id, decision, by=Principal.of(EMAIL, asserted.address), seen=asserted.seen
            )
        except AlreadyDecided as exc:
            return message_page(409, "Already decided", outcome_text(exc.item))
        except CardChanged:
            await self.log.release(key)
            return message_page(409, "This card changed", _CHANGED)
        except KillSwitchOn as exc:
            await self.log.release(key)
            return message_page(409, "Halted", str(exc))
        except AlreadyApproved as exc:
            return message_page(409, "Approved already", str(exc))
        except StepUpRequired as exc:  # a link alone cannot approve it: the page says where
            await self.log.release(key)
            return message_page(403, "Confirm with your passkey", str(exc))
        except NotAllowed:
            return message_page(
                403,
                "Not allowed",
                f"{asserted.address} is not an email approver of skill {item.skill}.",
            )
        except InvalidArguments as exc:
            await self.log.release(key)
            return self._form(asserted, item, exc.errors)
        return message_page(200, "Done", outcome_text(decided))


def _as_values(raw: dict[str, str | bool | None]) -> dict[str, Any]:
    """Submitted strings shaped like arguments again, so the form shows what was typed."""
    out: dict[str, Any] = {}
    for name, value in raw.items():
        target = out
        *parents, leaf = field_path(name)
        for parent in parents:
            target = target.setdefault(parent, {})
        target[leaf] = value
    return out


def links_router(desk: Callable[[Request], LinkDesk | None]) -> APIRouter:
    """The link routes; `desk` finds the LinkDesk for a request (None: email is not on)."""
    router = APIRouter(include_in_schema=False)

    @router.get(PATH + "/{token}")
    async def confirm(token: str, request: Request) -> HTMLResponse:
        found = desk(request)
        if found is None:
            return page_response(
                message_page(404, "Not found", "email is not configured on this server")
            )
        return page_response(await found.show(token))

    @router.post(PATH + "/{token}")
    async def decide(token: str, request: Request) -> HTMLResponse:
        found = desk(request)
        if found is None:
            return page_response(
                message_page(404, "Not found", "email is not configured on this server")
            )
        form = await request.form()
        values = {k: v for k, v in form.multi_items() if isinstance(v, str)}
        # A checkbox sends its hidden "false" and, when ticked, "true": ticked wins.
        for key, value in form.multi_items():
            if value == "true":
                values[key] = "true"
        return page_response(await found.submit(token, values))

    undo_routes(router, desk)  # a `notify` FYI's Undo link, beside the decision links
    return router


__all__ = [
    "PATH",
    "BadLink",
    "LinkAssertion",
    "LinkDesk",
    "link_key",
    "links_router",
    "make_links",
    "sign_link",
    "verify_link",
]
