"""Decisions on inbox items: the one function every channel calls.

`Inbox.decide` checks that the actor may decide through that channel (approver lists fail
closed), validates edited arguments against the tool's JSON schema, and records the decision
with a conditional update, so the first decision wins and a second is told who was first.
The run is re-queued in the same transaction, and every channel's copy is marked for update.
"""

from __future__ import annotations

import logging
from typing import Any

from agent.argforms import validate_arguments
from agent.context import Context
from agent.errors import AlreadyDecided, InvalidArguments, NotAllowed
from agent.model import (
    Approve,
    Box,
    Decision,
    Edit,
    EventKind,
    Item,
    ItemKind,
    ItemStatus,
    NewEvent,
    Reject,
)

log = logging.getLogger(__name__)

#: Channels whose actor is the owner of the API token: the owner may decide anything.
OWNER_CHANNELS = frozenset({"api", "web", "cli"})


class Inbox:
    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    def may_decide(self, item: Item, *, actor: str, channel: str) -> bool:
        if channel in OWNER_CHANNELS:
            return True
        skill = self.ctx.skills.get(item.skill) if item.skill in self.ctx.skills else None
        if skill is None:
            return False
        approvers = skill.approvers_for(item.tool, channel)
        if channel == "email":
            return actor.strip().lower() in approvers
        return actor in approvers

    async def decide(self, item_id: str, decision: Decision, *, actor: str, channel: str) -> Item:
        store, now = self.ctx.store, self.ctx.clock()
        item = await store.get_item(item_id)
        if item.box is not Box.ACTION:
            raise InvalidArguments({"": "this item is not an action: there is nothing to decide"})
        if not self.may_decide(item, actor=actor, channel=channel):
            await store.audit(
                action="decision_refused",
                actor=actor,
                channel=channel,
                now=now,
                run_id=item.run_id,
                item_id=item.id,
                detail={"decision": decision.kind, "why": "not an approver for this channel"},
            )
            raise NotAllowed(f"{actor} is not an approver of skill {item.skill!r} on {channel}")
        if item.decided:
            raise AlreadyDecided(item)
        final_args: dict[str, Any] | None = item.args
        match decision:
            case Edit(args=args):
                if item.kind is not ItemKind.TOOL:
                    raise InvalidArguments(
                        {
                            "": "a budget item can be approved (extend) or rejected (stop), not edited"
                        }
                    )
                errors = validate_arguments(item.schema or {}, args)
                if errors:
                    raise InvalidArguments(errors)
                final_args = args
            case Reject():
                final_args = None
            case Approve():
                pass
        event = NewEvent(
            EventKind.DECISION,
            {
                "item_id": item.id,
                "call_id": item.call_id,
                "decision": decision.kind,
                "args_before": item.args,
                "args": final_args,
                "reason": decision.reason if isinstance(decision, Reject) else None,
                "actor": actor,
                "channel": channel,
            },
        )
        decided = await store.record_decision(
            item.id,
            decision,
            actor=actor,
            channel=channel,
            now=now,
            final_args=final_args,
            event=event,
        )
        self.ctx.wake_workers()
        self.ctx.wake_outbox()
        return decided

    async def expire(self, item_id: str, *, reason: str, halt: bool = False) -> Item:
        """Close an action nobody answered in time, as if the clock had rejected it."""
        store, now = self.ctx.store, self.ctx.clock()
        event = NewEvent(
            EventKind.DECISION,
            {
                "item_id": item_id,
                "decision": "expired",
                "reason": reason,
                "actor": "timeout",
                "channel": "timer",
                "halt": halt,
            },
        )
        item = await store.get_item(item_id)
        event.data["call_id"] = item.call_id
        decided = await store.record_decision(
            item_id,
            Reject(reason),
            actor="timeout",
            channel="timer",
            now=now,
            final_args=None,
            event=event,
            status=ItemStatus.EXPIRED,
        )
        self.ctx.wake_workers()
        self.ctx.wake_outbox()
        return decided

    async def mark_read(self, item_id: str) -> Item:
        return await self.ctx.store.mark_read(item_id, now=self.ctx.clock())
