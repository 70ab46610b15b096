"""Requests: approvals and questions asked by agents Pizza Bot does not run.

An agent elsewhere (a script, a LangGraph graph, an MCP client) names an *inbox-only* skill
(a skill file without `model`) and asks: may this tool call run with these arguments, or
what is the answer to this question. The request becomes a run of that skill (trigger
"request", input its title), parked WAITING on one Action item — kind TOOL for an approval,
QUESTION for a question — with the events the engine writes for a call it asks about. So the
timeline, the audit trail, every channel's card, reminders, escalation, time-outs, approvers
and two-person approval all work as for the engine's own calls.

A request gets the verdict the engine's own call would (`pizzabot.agent.policy.call_verdict`:
the skill's rules, then its grants): `auto` or a grant approves at once and `deny` rejects
with the rule's reason, with no card; `ask` makes the item. Its decision ends the run in the
decision's own transaction (`pizzabot.agent.request_end`), DONE, its result the decision, with no worker
step. Waiting for the decision sleeps on `ctx.decisions`, the bell a decision rings for its
run, so a long-poll costs no database reads while nothing happens, and none when another
request is decided.

An approval may carry the agent's own text of what the call would do (`NewRequest.preview`):
its card shows it as a preview marked as that agent's word, not Pizza Bot's
(`pizzabot.agent.preview.requested_preview`).

A requester's `Idempotency-Key` makes a request safe to send again: the same key with the
same body is the same request; with another body it is a `Conflict`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from pizzabot.agent.addresses import Target
from pizzabot.agent.away_cards import route_cards
from pizzabot.agent.context import Context
from pizzabot.agent.errors import (
    AlreadyDecided,
    Conflict,
    InvalidArguments,
    KillSwitchOn,
    NotAllowed,
    NotFound,
)
from pizzabot.agent.events import DecisionMade, NewEvent, RunFinished, RunStarted, ToolRequest
from pizzabot.agent.model import (
    REQUEST_CALL,
    Approve,
    Box,
    Decision,
    Expired,
    Item,
    ItemKind,
    ItemStatus,
    Reject,
    Risk,
    RunStatus,
)
from pizzabot.agent.notify import fyi_item, notify_approvers
from pizzabot.agent.policy.call_verdict import Granted, call_verdict
from pizzabot.agent.policy.grants import Grant
from pizzabot.agent.policy.principal import Principal, Scope
from pizzabot.agent.policy.quorum import person_of
from pizzabot.agent.preview import requested_preview
from pizzabot.agent.questions import FREE_TEXT_SCHEMA
from pizzabot.agent.request_checks import MAX_JSON_BYTES, MAX_TIMEOUT, check_request
from pizzabot.agent.request_end import request_end, request_ended
from pizzabot.agent.request_state import NewRequest, RequestState, outcome_text, state_of
from pizzabot.agent.skills import Skill
from pizzabot.agent.store import StoredRequest, kill_reason
from pizzabot.agent.targets import targets_for

__all__ = ["MAX_JSON_BYTES", "MAX_TIMEOUT", "NewRequest", "RequestState", "Requests", "state_of"]

log = logging.getLogger(__name__)

#: The tool name a question's run records (a question calls no tool).
ASK_HUMAN = "ask_human"


@dataclass(frozen=True)
class _Verdict:
    """How a request is decided as it is made (None: a person is asked)."""

    decision: Decision | None = None
    by: str | None = None
    via: str | None = None
    rule: str | None = None
    risk: Risk = field(default_factory=Risk)
    grant: Grant | None = None
    #: Approved by a `notify` rule: its approvers are told (`pizzabot.agent.notify`).
    notify: bool = False


class Requests:
    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    async def create(
        self, new: NewRequest, *, by: Principal, idempotency_key: str | None = None
    ) -> tuple[RequestState, bool]:
        """Make the request for `by` (its run, item and deliveries in one transaction);
        return its state and whether it was made now (False: the key was seen with the same
        body). Filed and repeated requests are audited."""
        if by.kind == "system":
            raise NotAllowed(f"{by.describe()} files no requests")
        skill = self._skill(new.skill)
        check_request(new)
        body_hash = new.body_hash()
        if idempotency_key is not None:
            # A repeat gets its request even while the kill switch is on: nothing new starts.
            earlier = await self.ctx.store.request_by_key(by.requester, idempotency_key)
            if earlier is not None:
                return await self._repeat(earlier, body_hash, by), False
        kill = await self.ctx.store.get_kill()
        if kill is not None:
            raise KillSwitchOn(kill_reason(kill))
        now = self.ctx.clock()
        stored = self._stored(skill, new, by, idempotency_key, body_hash, now)
        verdict = await self._verdict(skill, new, stored.run_id, now)
        item = replace(
            self._item(skill, new, stored, verdict, now, by),
            requested_by=by.actor,
            requester_person=person_of(skill, by),
        )
        targets: list[Target] = []
        if verdict.decision is None:
            cards, targets = await route_cards(
                self.ctx, skill, [(item, None)], targets_for(skill, self.ctx.channels)
            )
            item = cards[0][0]
        stored, created = await self.ctx.store.create_request(
            stored,
            input=new.title,
            item=item,
            events=self._events(new, stored, item, verdict, by.actor),
            targets=targets,
            run_status=RunStatus.WAITING if verdict.decision is None else RunStatus.DONE,
            result=outcome_text(item) if verdict.decision is not None else None,
        )
        if not created:  # the same key, a moment earlier, in another call
            return await self._repeat(stored, body_hash, by), False
        if verdict.grant is not None and self.ctx.grants is not None:
            await self.ctx.grants.used(
                verdict.grant, run_id=stored.run_id, call_id=REQUEST_CALL, now=now
            )
        if verdict.notify and new.tool is not None:
            await self._notify(skill, new, stored, verdict, by)
        self.ctx.wake_outbox()
        self.ctx.wake_timers()  # its time-out, or its tool's, counts from now
        state = await self._state(stored)
        await self._audit("request_filed", state, by)
        return state, True

    async def _notify(
        self,
        skill: Skill,
        new: NewRequest,
        stored: StoredRequest,
        verdict: _Verdict,
        by: Principal,
    ) -> None:
        """Tell the approvers of a request a `notify` rule approved (`pizzabot.agent.notify`)."""
        fyi = fyi_item(
            self.ctx,
            skill,
            run_id=stored.run_id,
            tool=new.tool or "",
            args=new.args,
            why=verdict.by or "",
            asked_by=by.actor,
        )
        await notify_approvers(self.ctx, skill, fyi, lease=None)

    def _stored(
        self,
        skill: Skill,
        new: NewRequest,
        by: Principal,
        key: str | None,
        body_hash: str,
        now: datetime,
    ) -> StoredRequest:
        return StoredRequest(
            id=self.ctx.ids(),
            run_id=self.ctx.ids(),
            item_id=self.ctx.ids(),
            skill=skill.name,
            kind=new.kind,
            requester=by.requester,
            idempotency_key=key,
            body_hash=body_hash,
            callback_url=new.callback_url,
            timeout=new.timeout,
            created_at=now,
        )

    async def _repeat(self, earlier: StoredRequest, body_hash: str, by: Principal) -> RequestState:
        """The state of the request a key was used for, when this is the same request
        (audited: who was handed which answer)."""
        if earlier.body_hash != body_hash:
            raise Conflict(
                "this Idempotency-Key was used with another request body; "
                "use a new key for a new request"
            )
        state = await self._state(earlier)
        await self._audit("request_repeated", state, by)
        return state

    async def get(self, request_id: str, *, by: Principal) -> RequestState:
        """The request's state; an `ask` token sees only its own requests (another's is
        not found, as if it did not exist)."""
        return await self._state(await self._readable(request_id, by))

    async def wait(self, request_id: str, seconds: float, *, by: Principal) -> RequestState:
        """The request's state once it is decided (or halted by the kill switch), or after
        `seconds` (pending then). Woken by the decision bell, not by reading the database on
        a timer. A decided answer handed out is audited (`request_answered`)."""
        stored = await self._readable(request_id, by)
        # The bell looks once more when the wait ends: that look is the pending answer, not
        # another read (an agent asks again every minute; with thousands waiting the reads
        # are the server's work).
        last: list[RequestState] = []

        async def look() -> RequestState | None:
            state = await self._state(stored)
            last[:] = [state]
            return None if state.pending else state

        found = await self.ctx.decisions.until(look, seconds, run_id=stored.run_id)
        if found is None:
            return last[0]
        await self._audit("request_answered", found, by)
        return found

    async def withdraw(self, request_id: str, *, by: Principal) -> RequestState:
        """Withdraw a pending request (its requester no longer wants the answer): the item
        is closed (`cancelled`, shown as `expired` with the reason "withdrawn by ..."), every
        card says so, and its run ends. A request decided first keeps its decision; either
        way the state is returned, and a withdrawal is audited."""
        stored = await self._readable(request_id, by)
        item = await self.ctx.store.get_item(stored.item_id)
        if not item.decided:
            gone = Expired(reason=f"withdrawn by {by.actor}")
            event = DecisionMade(
                item_id=item.id,
                call_id=item.call_id,
                decision=gone,
                actor=by.actor,
                channel=by.channel,
            )
            try:
                closed = await self.ctx.store.record_decision(
                    item.id,
                    gone,
                    actor=by.actor,
                    channel=by.channel,
                    now=self.ctx.clock(),
                    final_args=None,
                    event=NewEvent(event),
                    status=ItemStatus.CANCELLED,
                    ends=request_end(item, gone, None, by=by.actor, via=by.channel),
                )
            except AlreadyDecided:
                pass  # a person was quicker: their decision stands
            else:
                await request_ended(self.ctx, closed, gone, by=by.actor, via=by.channel)
                self.ctx.decisions.ring(closed.run_id)
                self.ctx.wake_outbox()
        state = await self._state(stored)
        await self._audit("request_withdrawn", state, by)
        return state

    async def _readable(self, request_id: str, by: Principal) -> StoredRequest:
        stored = await self.ctx.store.get_request(request_id)
        if not by.scope.covers(Scope.DECIDE) and stored.requester != by.requester:
            raise NotFound(f"no request {request_id}")
        return stored

    async def _state(self, stored: StoredRequest) -> RequestState:
        item, kill = await self.ctx.store.request_item(stored.item_id)
        return state_of(stored, item, base_url=self.ctx.base_url, kill=kill)

    async def _audit(self, action: str, state: RequestState, by: Principal) -> None:
        await self.ctx.store.audit(
            action=action,
            actor=by.actor,
            channel=by.channel,
            now=self.ctx.clock(),
            run_id=state.run_id,
            item_id=state.item_id,
            detail={"request": state.id, "status": state.status, "principal": by.describe()},
        )

    def _skill(self, name: str) -> Skill:
        try:
            skill = self.ctx.skills.get(name)
        except NotFound as exc:
            raise InvalidArguments({"skill": str(exc)}) from None
        if not skill.inbox_only:
            raise InvalidArguments(
                {
                    "skill": f"{name} has a model and runs its own tools; a request names an "
                    "inbox-only skill (a skill file without model)"
                }
            )
        return skill

    async def _verdict(self, skill: Skill, new: NewRequest, run_id: str, now: datetime) -> _Verdict:
        """The verdict an engine call would get (`pizzabot.agent.policy.call_verdict`): the
        skill's rules, then its grants, on an approval; a question is always asked."""
        if new.tool is None:
            return _Verdict()
        verdict = call_verdict(skill, new.tool, new.args, claimed=new.risk, one_call=True)
        ruling, risk = verdict.ruling, verdict.risk
        match ruling.policy:
            case "deny":
                reason = ruling.reason or f"not allowed by {ruling.why}"
                return _Verdict(Reject(reason=reason), ruling.why, "policy", ruling.by_rule, risk)
            case "auto":
                return _Verdict(Approve(), ruling.why, "policy", ruling.by_rule, risk)
            case "notify":
                ruled = _Verdict(Approve(), ruling.why, "policy", ruling.by_rule, risk)
                return replace(ruled, notify=True)
            case "ask":
                pass
        grants = self.ctx.grants
        if grants is not None and risk.grants:
            found = await grants.for_call(skill=skill.name, tool=new.tool, run_id=run_id, now=now)
            granted = Granted(found, run_id, now)
            grant = call_verdict(
                skill, new.tool, new.args, claimed=new.risk, one_call=True, granted=granted
            ).grant
            if grant is not None:
                by = f"grant {grant.id} ({grant.describe()}, by {grant.granted_by})"
                return _Verdict(Approve(), by, "grant", risk=risk, grant=grant)
        return _Verdict(rule=ruling.by_rule, risk=risk)

    def _item(
        self,
        skill: Skill,
        new: NewRequest,
        stored: StoredRequest,
        verdict: _Verdict,
        now: datetime,
        by: Principal,
    ) -> Item:
        question = new.tool is None
        body = (new.question if question else new.description) or ""
        item = Item(
            id=stored.item_id,
            run_id=stored.run_id,
            skill=skill.name,
            box=Box.ACTION,
            kind=ItemKind.QUESTION if question else ItemKind.TOOL,
            status=ItemStatus.PENDING,
            title=new.title,
            body=body,
            created_at=now,
            call_id=REQUEST_CALL,
            tool=new.tool,
            args=dict(new.args),
            schema=(new.schema or FREE_TEXT_SCHEMA) if question else new.schema,
            risk=verdict.risk
            if new.preview is None
            else replace(verdict.risk, preview=requested_preview(new.preview, by.actor)),
            secret=self.ctx.secrets(),
        )
        final: dict[str, Any] | None
        why: str | None
        match verdict.decision:
            case None:
                return item
            case Reject(reason=reason):
                status, final, why = ItemStatus.REJECTED, None, reason
            case _:
                status, final, why = ItemStatus.APPROVED, dict(new.args), None
        return replace(
            item,
            status=status,
            decided_by=verdict.by,
            decided_via=verdict.via,
            decided_at=now,
            final_args=final,
            reason=why,
        )

    def _events(
        self,
        new: NewRequest,
        stored: StoredRequest,
        item: Item,
        verdict: _Verdict,
        requester: str,
    ) -> list[NewEvent]:
        tool = new.tool or ASK_HUMAN
        events = [
            NewEvent(RunStarted(input=new.title, trigger="request", by=requester)),
            NewEvent(
                ToolRequest(
                    call_id=REQUEST_CALL,
                    item_id=item.id,
                    tool=tool,
                    args=dict(new.args),
                    rule=verdict.rule,
                )
            ),
        ]
        if verdict.decision is None:
            return events
        decided = DecisionMade(
            item_id=item.id,
            call_id=REQUEST_CALL,
            decision=verdict.decision,
            args_before=dict(new.args),
            args=item.final_args,
            actor=verdict.by or "policy",
            channel=verdict.via or "policy",
        )
        finished = RunFinished(status=RunStatus.DONE, result=outcome_text(item))
        return [*events, NewEvent(decided), NewEvent(finished)]
