"""The inbox and its items: the two boxes, an item's page, and deciding it.

An item page's three forms (approve, edit, reject) post to the page's own address with a
``decision`` field, so a refused edit comes back as a 422 at ``/items/{id}`` carrying what
was typed and the errors: the address a reload, a bookmark or a copied link shows correctly.
The ``/approve``, ``/edit`` and ``/reject`` addresses stay for pages loaded before.

A call that needs a passkey (`pizzabot.agent.step_up`) is approved by the same forms, carrying the
passkey's answer the page's script added (`routes_passkeys`). A notification's button opens
the page with `?confirm=approve|reject`, which only says what was chosen: the person decides
here.

An Unread FYI of a `notify` call may offer Undo (`pizzabot.agent.undo`): its form posts to
``/items/{id}/undo``, and the page then says how the compensating call ended.

A question item (a running tool asks a person, `pizzabot.agent.questions`) posts the same decisions:
Send is an edit with the form's values, Decline a reject, and a link's Done an approval.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.responses import HTMLResponse, Response

from pizzabot.agent.batch import TurnReader, turn_items
from pizzabot.agent.card_digest import card_digest
from pizzabot.agent.errors import (
    AlreadyApproved,
    AlreadyDecided,
    AlreadyUndone,
    CardChanged,
    Conflict,
    InvalidArguments,
    KillSwitchOn,
    NotAllowed,
    NotFound,
)
from pizzabot.agent.model import (
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
from pizzabot.agent.questions import answer_of, question_url, read_link
from pizzabot.agent.step_up import Assertion, item_step_up
from pizzabot.agent.undo import undo_line
from pizzabot.channels.web._pages import (
    error_page,
    fragment,
    go,
    live,
    not_found,
    page,
    safe_next,
)
from pizzabot.channels.web.deps import Post, Posted, SignedIn, SignedInLive, Visit
from pizzabot.channels.web.forms import FieldView, field_views, read_form

__all__ = ["router"]

#: What a decision from a page that no longer shows the item is told (the page shows it anew).
CHANGED = (
    "This call was changed after the page showed it, so nothing was decided. "
    "It is shown below as it is now: look again, then decide."
)

#: The longest passkey answer a form may carry (a few signatures and ids, base64url).
_MAX_ASSERTION = 16_000

#: What the page says when a notification's button brought the person here.
_CONFIRM = {
    "approve": "You chose Approve in the notification: nothing is decided yet. Look at the "
    "call, then approve it here.",
    "reject": "You chose Reject in the notification: nothing is decided yet. Give a reason "
    "if you like, then reject it here.",
}

router = APIRouter()


@router.get("/")
async def home(v: SignedIn) -> Response:
    return await page(v, "inbox.html", section="inbox", **await _boxes(v))


@router.get("/boxes")
async def boxes_fragment(v: SignedInLive) -> Response:
    async def make() -> str:
        return fragment(v, "_boxes.html", **await _boxes(v))

    return await live(v, make)


@router.post("/items/read-all")
async def read_all(post: Posted) -> Response:
    deps = post.visit.deps
    for item in await deps.store.list_items(box=Box.UNREAD, status=ItemStatus.UNREAD):
        await deps.inbox.mark_read(item.id)
    return go(post.visit, "/", "allread")


@router.get("/items/{item_id}")
async def item_get(item_id: str, v: SignedIn) -> Response:
    try:
        item = await v.deps.store.get_item(item_id)
    except NotFound:
        return await not_found(v, "item")
    return await _item_page(v, item)


@router.get("/items/{item_id}/state")
async def item_state(item_id: str, v: SignedInLive) -> Response:
    try:
        await v.deps.store.get_item(item_id)
    except NotFound:
        return Response(status_code=404)

    async def make() -> str:
        return fragment(v, "_item_state.html", item=await v.deps.store.get_item(item_id))

    return await live(v, make)


@router.post("/items/{item_id}")
async def item_post(item_id: str, post: Posted) -> Response:
    match post.text("decision"):
        case "approve":
            return await _approve(post, item_id)
        case "edit":
            return await _edit(post, item_id)
        case "reject":
            return await _reject(post, item_id)
        case _:
            return await error_page(
                post.visit,
                400,
                "Unknown decision",
                "Go back, reload the page and choose approve, edit or reject.",
            )


@router.post("/items/{item_id}/approve")
async def approve(item_id: str, post: Posted) -> Response:
    return await _approve(post, item_id)


@router.post("/items/{item_id}/reject")
async def reject(item_id: str, post: Posted) -> Response:
    return await _reject(post, item_id)


@router.post("/items/{item_id}/edit")
async def edit(item_id: str, post: Posted) -> Response:
    return await _edit(post, item_id)


@router.post("/items/{item_id}/read")
async def mark_read(item_id: str, post: Posted) -> Response:
    try:
        await post.visit.deps.inbox.mark_read(item_id)
    except NotFound:
        return await not_found(post.visit, "item")
    back = safe_next(post.text("next")) or f"/items/{item_id}"
    return go(post.visit, back, "read")


@router.post("/items/{item_id}/undo")
async def undo(item_id: str, post: Posted) -> Response:
    """Run the compensating call the FYI offers, then back to its page, which says how it went."""
    v = post.visit
    try:
        item = await v.deps.inbox.undo(item_id, by=v.by)
    except NotFound:
        return await not_found(v, "item")
    except AlreadyUndone:
        return go(v, f"/items/{item_id}", "undone_before")
    except (NotAllowed, Conflict) as exc:
        item = await v.deps.store.get_item(item_id)
        return await _item_page(v, item, form_error=str(exc), status=_refused(exc))
    done = item.undo is not None and item.undo.state == "done"
    return go(v, f"/items/{item_id}", "undone" if done else "undo_failed")


async def _boxes(v: Visit) -> dict[str, Any]:
    store = v.deps.store
    action = await store.list_items(box=Box.ACTION, status=ItemStatus.PENDING)
    unread = await store.list_items(box=Box.UNREAD, status=ItemStatus.UNREAD)
    if not v.by.is_admin:  # a person signed in with a decide token sees what is theirs
        policy = v.deps.policy
        action = [i for i in action if policy.may_see(v.by, i)]
        unread = [i for i in unread if policy.may_see(v.by, i)]
    return {"action": action, "unread": unread}


async def _approve(post: Post, item_id: str) -> Response:
    # "Approve, and don't ask again for …": the button's grant; the inbox refuses one the
    # card did not offer.
    return await _decide(post, item_id, Approve(grant=post.text("grant").strip()[:32] or None))


def _assertion(post: Post) -> Assertion | None:
    """The passkey's answer the page's script put on an approval that needs one."""
    nonce, credential = post.text("nonce").strip()[:100], post.text("assertion")
    if not nonce or not credential or len(credential) > _MAX_ASSERTION:
        return None
    return Assertion(nonce=nonce, credential=credential)


async def _reject(post: Post, item_id: str) -> Response:
    return await _decide(post, item_id, Reject(post.text("reason").strip()[:4000]))


async def _decide(post: Post, item_id: str, decision: Decision) -> Response:
    """Approve or reject (a budget item: extend or stop), then back to the item's page."""
    v = post.visit
    try:
        item = await v.deps.inbox.decide(
            item_id, decision, by=v.by, seen=_seen(post), step_up=_assertion(post)
        )
    except NotFound:
        return await not_found(v, "item")
    except AlreadyDecided:
        return go(v, f"/items/{item_id}", "late")
    except AlreadyApproved:
        return go(v, f"/items/{item_id}", "twice")
    except CardChanged as exc:
        return await _item_page(v, exc.item, form_error=CHANGED, status=409)
    except (NotAllowed, KillSwitchOn) as exc:
        item = await v.deps.store.get_item(item_id)
        return await _item_page(v, item, form_error=str(exc), status=_refused(exc))
    except InvalidArguments as exc:
        item = await v.deps.store.get_item(item_id)
        return await _item_page(v, item, form_error=_joined(exc.errors), status=422)
    budget = item.kind is ItemKind.BUDGET
    if item.kind is ItemKind.QUESTION:
        return go(v, f"/items/{item_id}", "answered" if item.final_args is not None else "declined")
    if not item.decided:  # more than one person must approve: counted, not yet decided
        return go(v, f"/items/{item_id}", "counted")
    if isinstance(decision, Approve):
        return go(v, f"/items/{item_id}", "extended" if budget else "approved")
    return go(v, f"/items/{item_id}", "stopped" if budget else "rejected")


async def _edit(post: Post, item_id: str) -> Response:
    """Approve with the form's arguments; a refused form comes back, as typed, with a 422."""
    v = post.visit
    try:
        item = await v.deps.store.get_item(item_id)
    except NotFound:
        return await not_found(v, "item")
    if item.decided:
        return go(v, f"/items/{item_id}", "late")
    schema = item.schema or {}
    args, errors, raw = read_form(schema, post.form)
    if not errors:
        try:
            edited = await v.deps.inbox.decide(
                item_id, Edit(args), by=v.by, seen=_seen(post), step_up=_assertion(post)
            )
        except AlreadyDecided:
            return go(v, f"/items/{item_id}", "late")
        except CardChanged as exc:
            return await _item_page(v, exc.item, form_error=CHANGED, status=409)
        except (NotAllowed, KillSwitchOn) as exc:
            return await _item_page(v, item, form_error=str(exc), status=_refused(exc))
        except InvalidArguments as exc:
            errors = exc.errors
        else:
            if item.kind is ItemKind.QUESTION:
                return go(v, f"/items/{item_id}", "answered")
            return go(v, f"/items/{item_id}", "edited" if edited.decided else "counted")
        general = _joined(errors)
    else:
        general = errors.get("") or "Some fields need a fix; see below."
    views = field_views(schema, item.args, raw=raw, errors=errors)
    return await _item_page(v, item, views=views, form_error=general, status=422)


async def _item_page(
    v: Visit,
    item: Item,
    *,
    views: list[FieldView] | None = None,
    form_error: str | None = None,
    status: int = 200,
) -> HTMLResponse:
    store, skills = v.deps.store, v.deps.skills
    try:
        run: Run | None = await store.get_run(item.run_id)
    except NotFound:
        run = None
    form = item.kind is ItemKind.TOOL or (
        item.kind is ItemKind.QUESTION and item.schema is not None
    )
    editable = form and not item.decided and item.box is Box.ACTION
    if views is None and editable:
        views = field_views(item.schema or {}, item.args)
    link = question_url(item)
    tool, server = item.tool_place
    return await page(
        v,
        "item.html",
        status=status,
        section="inbox",
        item=item,
        run=run,
        skill=skills.get(item.skill) if item.skill in skills else None,
        server=server,
        tool=tool,
        pending=item.box is Box.ACTION and item.status is ItemStatus.PENDING,
        # The run's other waiting calls of the same model turn, by id with the digest of each
        # card: "Approve all (N)" approves them as shown here.
        turn=await _turn_seen(store, item) if item.kind is ItemKind.TOOL else {},
        views=views or [],
        form_error=form_error,
        edit_open=form_error is not None or any(f.error for f in views or []),
        reason="",
        deliveries=await store.deliveries(item.id),
        link=link,
        # Read as a browser reads it: a link that is refused is shown as text with the
        # reason, never offered to open and never said to lead anywhere.
        opens=read_link(link) if link is not None else None,
        answer=answer_of(item) if item.kind is ItemKind.QUESTION else None,
        seen=card_digest(item),
        step_up=item_step_up(item, skills.get(item.skill) if item.skill in skills else None),
        confirm=_CONFIRM.get(v.request.query_params.get("confirm", "")),
        undo_said=undo_line(item.undo) if item.undo is not None else None,
    )


async def _turn_seen(store: TurnReader, item: Item) -> dict[str, str]:
    return {i.id: card_digest(i) for i in await turn_items(store, item.run_id)}


def _seen(post: Post) -> str | None:
    """The digest of the card the form was on (`pizzabot.agent.card_digest`); None from a page
    loaded before pages carried one."""
    return post.text("seen").strip()[:64] or None


def _refused(exc: Exception) -> int:
    return 409 if isinstance(exc, Conflict) else 403


def _joined(errors: dict[str, str]) -> str:
    return "; ".join(f"{k}: {v}" if k else v for k, v in errors.items())
