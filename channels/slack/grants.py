"""Grants in Slack: the card's "Approve, and don't ask again" menu, `/pizza grants`, and
the Revoke buttons of its listing.

A Slack user sees and revokes the grants of the tools they may approve on Slack (the
skill's `approvers.slack`, and those its items escalate to), as the policy says
(`pizzabot.agent.policy.grants.may_manage`); the grant itself is made by the inbox, like any
approval, and refused there when the card did not offer it.
"""

from __future__ import annotations

import logging
from typing import Any

from slack_sdk.web.async_client import AsyncWebClient

from pizzabot.agent.errors import NotAllowed, NotFound
from pizzabot.agent.model import Approve
from pizzabot.agent.policy import Principal
from pizzabot.agent.policy.grants import Grant, revoke_grant
from pizzabot.channels.slack import blocks
from pizzabot.channels.slack.payloads import where
from pizzabot.channels.slack.ports import SlackDesk

__all__ = ["grants_reply", "on_grant", "on_revoke"]

log = logging.getLogger(__name__)

CHANNEL = "slack"
#: Slack allows 50 blocks in a message; the web page and the CLI list them all.
_MAX_LISTED = 40


def _covers(g: Grant) -> str:
    match g.scope:
        case "run":
            return f"the rest of run `{g.run_id}`"
        case "exact":
            return f"these arguments in *{blocks.esc(g.skill)}*: `{blocks.esc(_short(g.args))}`"
        case _:
            return f"{blocks.esc(g.choice)} in *{blocks.esc(g.skill)}*"


def _short(args: dict[str, Any] | None, limit: int = 300) -> str:
    text = ", ".join(f"{k}={v!r}" for k, v in (args or {}).items())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _line(g: Grant) -> str:
    until = (
        f"until {blocks.when(g.expires_at)}"
        if g.expires_at
        else ("until the run ends" if g.scope == "run" else "until revoked")
    )
    granted = blocks.who(g.granted_by, g.granted_via)
    return (
        f"`{blocks.esc(g.tool)}` for {_covers(g)}, {until}\n"
        f"granted by {granted} via {blocks.esc(g.granted_via)}; used {g.uses}×"
    )


def listing(grants: list[Grant]) -> list[dict[str, Any]]:
    """One section per grant, each with its Revoke button."""
    out: list[dict[str, Any]] = []
    for g in grants[:_MAX_LISTED]:
        out.append(
            {
                "type": "section",
                "block_id": f"grant:{g.id}",
                "text": {"type": "mrkdwn", "text": _line(g)},
                "accessory": {
                    "type": "button",
                    "action_id": blocks.REVOKE_GRANT,
                    "text": {"type": "plain_text", "text": "Revoke"},
                    "style": "danger",
                    "value": g.id,
                    "confirm": {
                        "title": {"type": "plain_text", "text": "Revoke this grant?"},
                        "text": {"type": "mrkdwn", "text": "From the next call on, it asks again."},
                        "confirm": {"type": "plain_text", "text": "Revoke"},
                        "deny": {"type": "plain_text", "text": "Cancel"},
                        "style": "danger",
                    },
                },
            }
        )
    return out


async def _yours(inbound: SlackDesk, user: str) -> list[Grant]:
    kept = inbound.inbox.ctx.grants
    if kept is None:
        return []
    found = await kept.list_grants(now=inbound.inbox.ctx.clock())
    who = Principal.of(CHANNEL, user)
    return [g for g in found if inbound.access.may_revoke(who, g.skill, g.tool)]


async def grants_reply(inbound: SlackDesk, user: str) -> dict[str, Any]:
    """`/pizza grants`: the grants in force that `user` may revoke, as an ephemeral answer."""
    mine = await _yours(inbound, user)
    if not mine:
        return {"text": "No grant in force that you approve for.", "response_type": "ephemeral"}
    more = len(mine) - _MAX_LISTED
    head = f"*Grants in force* ({len(mine)}): calls they cover run without asking."
    if more > 0:
        head += f" The first {_MAX_LISTED} are shown; the web page lists all."
    return {
        "text": head,
        "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": head}}, *listing(mine)],
        "response_type": "ephemeral",
    }


async def on_grant(
    inbound: SlackDesk, *, body: dict[str, Any], client: AsyncWebClient, retried: bool
) -> None:
    """A choice of the card's menu: approve, and don't ask again as chosen."""
    action = body["actions"][0]
    value = str((action.get("selected_option") or {}).get("value") or "")
    item_id, _, rest = value.partition(":")
    choice, _, seen = rest.partition(":")
    channel, thread = where(body)
    await inbound.decide(
        client,
        item_id=item_id,
        decision=Approve(grant=choice or None),
        user=str(body["user"]["id"]),
        channel=channel,
        thread_ts=thread,
        retried=retried,
        seen=seen or None,
    )


async def on_revoke(inbound: SlackDesk, *, body: dict[str, Any], client: AsyncWebClient) -> None:
    """A listing's Revoke button: ended from the next call on, and the clicker told so."""
    user = str(body["user"]["id"])
    grant_id = str(body["actions"][0].get("value") or "")
    channel = (body.get("container") or {}).get("channel_id")
    kept = inbound.inbox.ctx.grants
    note: str
    try:
        if kept is None:
            raise NotFound(grant_id)
        now = inbound.inbox.ctx.clock()
        who = Principal.of(CHANNEL, user)
        grant = await revoke_grant(kept, inbound.access, inbound.store, grant_id, by=who, now=now)
        note = f"Revoked: `{blocks.esc(grant.tool)}` for {_covers(grant)}. It asks again."
    except NotAllowed:
        note = "Only the skill's Slack approvers for that tool can revoke this grant."
    except NotFound:
        note = "This grant no longer exists."
    await inbound.tell(client, channel=channel, user=user, text=note)
