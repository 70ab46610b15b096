"""The inbox and its items under /api: list, read, decide, mark read.

    GET  /api/inbox?box=unread|action    open items (&all=true: decided and read ones too);
                                         a decide token sees what its person may see
    GET  /api/items/{id}                 one item, with its card's `version` and `digest`
    POST /api/items/{id}/decision        {decision, args?, reason?, grant?, seen?}
    POST /api/items/{id}/read            an Unread item, marked read
    POST /api/items/{id}/undo            a `notify` FYI's Undo: run its compensating call

A decision goes through `pizzabot.agent.inbox.Inbox.decide` as the caller: the policy says whether
they may, `seen` (the digest of the card they decided on) binds it to what they saw. An Undo
goes through `pizzabot.agent.inbox.Inbox.undo` the same way (`pizzabot.agent.undo`): who may
decide the tool's cards may undo, once (a second is 409, saying who undid it).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends
from pydantic import BaseModel, Field

from pizzabot.agent.errors import Conflict, InvalidArguments
from pizzabot.agent.model import Box, ItemStatus, decision_from
from pizzabot.agent.policy.principal import Principal
from pizzabot.channels.http import schema as out
from pizzabot.channels.http.answers import item_out
from pizzabot.channels.http.bodies import BoundedJsonRoute
from pizzabot.channels.http.deps import Deps
from pizzabot.channels.http.schema import errors
from pizzabot.channels.http.scopes import DECIDING, caller

__all__ = ["router"]

router = APIRouter(
    prefix="/api",
    route_class=BoundedJsonRoute,
    dependencies=[Depends(caller)],
    responses=errors(401, 403, 422),
)
WITH_BODY = errors(400, 408, 413)

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


@router.get("/inbox", response_model=out.ItemList)
async def inbox(
    deps: Deps,
    box: Literal["unread", "action"] | None = None,
    all: bool = False,
    who: Principal = DECIDING,
) -> out.ItemList:
    """The inbox: everything for an admin; for a decide token, what its person may see."""
    items = await deps.store.list_items(box=Box(box) if box else None)
    if not all:
        items = [i for i in items if i.status in {ItemStatus.PENDING, ItemStatus.UNREAD}]
    if not who.is_admin:
        items = [i for i in items if deps.access.may_see(who, i)]
    return out.ItemList(items=[item_out(i) for i in items])


@router.get(
    "/items/{item_id}", response_model=out.ItemOut, responses=errors(404), dependencies=[DECIDING]
)
async def get_item(item_id: str, deps: Deps) -> out.ItemOut:
    return item_out(await deps.store.get_item(item_id))


@router.post(
    "/items/{item_id}/decision",
    response_model=out.ItemOut,
    responses={**WITH_BODY, **errors(404, 409)},
)
async def decide(
    item_id: str, body: DecisionIn, deps: Deps, who: Principal = DECIDING
) -> out.ItemOut:
    if (await deps.store.get_item(item_id)).box is not Box.ACTION:
        raise Conflict("this item is not an action: there is nothing to decide")
    try:
        decision = decision_from(
            body.decision, args=body.args, reason=body.reason, grant=body.grant
        )
    except ValueError as exc:
        raise InvalidArguments({"grant": str(exc)}) from None
    return item_out(await deps.inbox.decide(item_id, decision, by=who, seen=body.seen))


@router.post(
    "/items/{item_id}/read",
    response_model=out.ItemOut,
    responses=errors(404),
    dependencies=[DECIDING],
)
async def mark_read(item_id: str, deps: Deps) -> out.ItemOut:
    return item_out(await deps.inbox.mark_read(item_id))


@router.post(
    "/items/{item_id}/undo",
    response_model=out.ItemOut,
    responses=errors(404, 409),
)
async def undo(item_id: str, deps: Deps, who: Principal = DECIDING) -> out.ItemOut:
    """Run the compensating call a `notify` FYI offers; the item says how it ended."""
    return item_out(await deps.inbox.undo(item_id, by=who))
