"""The browsers that get Web Push, under /api/push (bearer token): listed and removed.

    GET    /api/push/subscriptions        {"items": [subscription]}: the caller's; an admin's: all
    DELETE /api/push/subscriptions/{id}   subscription, removed: that browser gets no more pushes

A browser subscribes on the web page (its Phone tab), where the browser hands over its
subscription; the API only shows and removes them. A subscription is shown without its
endpoint URL and keys (whoever holds those can push to the browser): by the push service's
host, the device's label and whose it is.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from fastapi import APIRouter, Depends, HTTPException
from pydantic import BaseModel

from pizzabot.agent.devices import Subscription, Subscriptions
from pizzabot.agent.policy.principal import Principal
from pizzabot.channels.http.deps import ApiDeps, Deps
from pizzabot.channels.http.schema import errors
from pizzabot.channels.http.scopes import DECIDING, caller


class SubscriptionOut(BaseModel):
    id: str
    #: What the page said of the device ("Chrome on Android").
    label: str
    #: Whose it is: `owner`, or `token:ID` for a named token's person.
    holder: str
    #: The push service the browser chose (its host name only).
    service: str
    created_at: str


class SubscriptionList(BaseModel):
    items: list[SubscriptionOut]


def subscription_out(sub: Subscription) -> SubscriptionOut:
    return SubscriptionOut(
        id=sub.id,
        label=sub.label,
        holder=sub.principal,
        service=urlsplit(sub.endpoint).hostname or "",
        created_at=sub.created_at.isoformat(),
    )


def push_of(deps: ApiDeps) -> Subscriptions:
    if deps.push is None:
        raise HTTPException(404, "this server keeps no push subscriptions")
    return deps.push


router = APIRouter(
    prefix="/api/push",
    dependencies=[Depends(caller)],
    responses=errors(401, 403, 404, 422),
)


@router.get("/subscriptions", response_model=SubscriptionList)
async def list_subscriptions(deps: Deps, who: Principal = DECIDING) -> SubscriptionList:
    push = push_of(deps)
    found = await push.list_subscriptions(None if who.is_admin else who.requester)
    return SubscriptionList(items=[subscription_out(s) for s in found])


@router.delete("/subscriptions/{sub_id}", response_model=SubscriptionOut)
async def remove_subscription(
    sub_id: str, deps: Deps, who: Principal = DECIDING
) -> SubscriptionOut:
    push = push_of(deps)
    sub = await push.get(sub_id)
    if sub is None or not (who.is_admin or sub.principal == who.requester):
        raise HTTPException(404, "no such subscription")
    await push.remove(
        sub_id, actor=who.actor, channel=who.channel, why="removed by API", now=deps.clock()
    )
    return subscription_out(sub)
