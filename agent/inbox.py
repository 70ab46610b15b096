"""Decisions on inbox items: the one function every channel calls.

`Inbox.decide` checks that the principal may decide the item (`pizzabot.agent.policy.access`:
approver lists fail closed, an `ask` token decides nothing), that the kill switch is off, that
the decision was made on the card as it is now (`pizzabot.agent.card_digest`: a stale card is refused
and shown again), and that nobody approves their own request where that counts; it validates
edited arguments against the tool's JSON schema and the skill's rules (an
edit a rule denies is refused with the rule's reason) and an approval's grant against those
the card offers, and records the decision
with a conditional update, so the first decision wins and a second is told who was first.
Where a tool needs more than one person (`approvals.required`), an approval or an edit is
counted first (`pizzabot.agent.policy.quorum`), and the decision is recorded once the count is reached.
The run is re-queued in the same transaction, and every channel's copy is marked for update;
where a worker runs in this process and has room (`Handover`), the same transaction claims
the run for it instead, and its step starts at once.

A call that needs a passkey (`step_up: passkey`, see `pizzabot.agent.step_up`) is approved
only with a fresh passkey assertion bound to its card's digest, checked here so that no
channel can forget it; a reject never needs one.

A question item (`ItemKind.QUESTION`, see `pizzabot.agent.questions`) is answered with the same
decisions: an edit accepts the values it carries, an approval accepts the proposed values,
both checked against the question's form; a reject declines. One person answers a question.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import datetime
from typing import Any, assert_never

from pizzabot.agent.argforms import validate_arguments
from pizzabot.agent.card_digest import card_digest, seen_matches
from pizzabot.agent.context import Context
from pizzabot.agent.errors import (
    AlreadyDecided,
    CardChanged,
    InvalidArguments,
    KillSwitchOn,
    NotAllowed,
    NotFound,
    OwnRequest,
    PasskeyRefused,
    StepUpRequired,
)
from pizzabot.agent.events import DecisionMade, NewEvent
from pizzabot.agent.model import (
    Approve,
    Box,
    Decision,
    Edit,
    Expired,
    Item,
    ItemKind,
    ItemStatus,
    Reject,
)
from pizzabot.agent.policy import Verdict, audit_refusal
from pizzabot.agent.policy.away import acting_for, counted_already
from pizzabot.agent.policy.grants import same_choice
from pizzabot.agent.policy.principal import Principal
from pizzabot.agent.policy.quorum import Count, count, person_of, required_for
from pizzabot.agent.policy.rules import judge
from pizzabot.agent.preview import edited_preview
from pizzabot.agent.questions import question_url, validate_answer, with_defaults
from pizzabot.agent.request_end import request_end, request_ended
from pizzabot.agent.step_up import Assertion, item_step_up
from pizzabot.agent.store import RunEnd, kill_reason
from pizzabot.agent.undo import undo

log = logging.getLogger(__name__)


class Inbox:
    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    def may_decide(self, item: Item, *, by: Principal) -> Verdict:
        """The policy's answer (`pizzabot.agent.policy.access`): admins may decide anything; people
        and decide tokens what they approve; ask tokens and triggers nothing."""
        return self.ctx.access.may_decide(by, item)

    async def undo(self, item_id: str, *, by: Principal) -> Item:
        """Run the compensating call a `notify` FYI offers, as `by` (`pizzabot.agent.undo`)."""
        return await undo(self.ctx, item_id, by=by)

    async def decide(
        self,
        item_id: str,
        decision: Decision,
        *,
        by: Principal,
        seen: str | None = None,
        step_up: Assertion | None = None,
    ) -> Item:
        """Take `by`'s decision on the item, as the card whose digest is `seen` showed it
        (`pizzabot.agent.card_digest`; None: as it is when read here). An approval of a call
        that needs a passkey counts only with `step_up`, an assertion for this card
        (`pizzabot.agent.step_up`)."""
        store, now = self.ctx.store, self.ctx.clock()
        item = await store.get_item(item_id)
        by = await acting_for(self.ctx.access, by, item)  # a delegate: "bob for alice"
        await self._check_decidable(item, decision, by=by, seen=seen, now=now)
        final_args = await self._final_args(item, decision)
        if isinstance(decision, Approve | Edit):
            await self._check_step_up(item, decision, by=by, assertion=step_up, now=now)
        args_before = item.args
        if isinstance(decision, Approve | Edit) and self._required(item) > 1:
            counted = await self._count(item, decision, by=by)
            if not counted.reached:
                self.ctx.wake_outbox()
                return await store.get_item(item.id)
            decision, args_before = counted.decision()
            final_args = counted.args
        ends = request_end(item, decision, final_args, by=by.actor, via=by.channel)
        try:
            decided = await self._record(
                item, decision, args_before, final_args, by=by, now=now, ends=ends
            )
        except CardChanged as exc:
            await self._changed(exc.item, decision, by=by, now=now)
            raise
        if ends is not None:
            await request_ended(self.ctx, decided, decision, by=by.actor, via=by.channel)
        # The store handed the run to this process's worker, or woke it; whoever waits on
        # an answer of this run looks now.
        self.ctx.decisions.ring(decided.run_id)
        self.ctx.wake_outbox()
        return decided

    async def _check_decidable(
        self, item: Item, decision: Decision, *, by: Principal, seen: str | None, now: datetime
    ) -> None:
        """Refuse a decision on what is not an action; by someone who may not decide it, or
        on their own request where that counts (audited); on an item already decided;
        while the kill switch is on (audited); from a card that no longer shows the item
        (audited, and every copy shown again)."""
        if item.box is not Box.ACTION:
            raise InvalidArguments({"": "this item is not an action: there is nothing to decide"})
        detail = {"decision": decision.kind}
        verdict = self.may_decide(item, by=by)
        if not verdict:
            await audit_refusal(
                self.ctx.store, verdict, now=now, run_id=item.run_id, item_id=item.id, detail=detail
            )
            raise NotAllowed(f"{by.describe()} may not decide this item: {verdict.why}")
        if item.decided:
            raise AlreadyDecided(item)
        kill = await self.ctx.store.get_kill()
        if kill is not None:
            refused = KillSwitchOn(kill_reason(kill))
            await self._audit_refused(item, by, {**detail, "why": str(refused)}, now)
            raise refused
        if not seen_matches(item, seen):
            await self._changed(item, decision, by=by, now=now)
            raise CardChanged(item)
        if isinstance(decision, Approve | Edit):
            await self._check_self_approval(item, by, detail, now)

    async def _check_self_approval(
        self, item: Item, by: Principal, detail: Mapping[str, str], now: datetime
    ) -> None:
        """Nobody approves what they asked for where it matters: the requester never counts
        toward a rule that needs more than one person, and a skill or tool that says
        `self_approval: false` refuses their approval outright. (Rejecting one's own request
        withdraws it, and is always allowed.)"""
        twice = counted_already(item, by)  # a delegate, for someone counted already
        if twice is not None:
            await self._audit_refused(item, by, {**detail, "why": str(twice)}, now)
            raise twice
        if item.requester_person is None or item.kind is not ItemKind.TOOL:
            return
        skill = self.ctx.skills.get(item.skill) if item.skill in self.ctx.skills else None
        behalf = by.on_behalf[1] if by.on_behalf is not None else None
        if item.requester_person not in (person_of(skill, by), behalf):
            return
        required = self._required(item)
        if skill is not None and not skill.self_approval_for(item.tool):
            why = f"{item.requested_by} asked for this call, and skill {item.skill!r} says nobody approves their own request (self_approval: false)"
        elif required > 1:
            why = f"{item.requested_by} asked for this call: it needs {required} other people's approval"
        else:
            return
        await self._audit_refused(item, by, {**detail, "why": why}, now)
        raise OwnRequest(why)

    async def _check_step_up(
        self,
        item: Item,
        decision: Approve | Edit,
        *,
        by: Principal,
        assertion: Assertion | None,
        now: datetime,
    ) -> None:
        """Refuse (audited) an approval of a call that needs a passkey, unless `assertion` is
        one of `by`'s passkeys confirming this very card; audit the confirmation."""
        skill = self.ctx.skills.get(item.skill) if item.skill in self.ctx.skills else None
        if item_step_up(item, skill) is None:
            return
        url = f"{self.ctx.base_url}/items/{item.id}" if self.ctx.base_url else ""
        digest = card_digest(item)
        detail = {"decision": decision.kind}
        confirmer = self.ctx.step_up
        if assertion is None or confirmer is None:
            why = "this call needs a passkey to approve"
            if confirmer is None:
                why += ", and this server checks no passkeys"
            await self._audit_refused(item, by, {**detail, "why": why}, now)
            raise StepUpRequired(why, url=url)
        try:
            name = await confirmer.confirm(item, digest=digest, by=by, assertion=assertion)
        except PasskeyRefused as exc:
            why = f"the passkey was not accepted ({exc})"
            await self._audit_refused(item, by, {**detail, "why": why}, now)
            raise StepUpRequired(why, url=url) from exc
        await self.ctx.store.audit(
            action="step_up_confirmed",
            actor=by.actor,
            channel=by.channel,
            now=now,
            run_id=item.run_id,
            item_id=item.id,
            detail={**detail, "passkey": name, "digest": digest},
        )

    async def _changed(
        self, item: Item, decision: Decision, *, by: Principal, now: datetime
    ) -> None:
        """A decision came from a card that no longer shows the item: audit it, and show
        every copy again so its person gets the new card."""
        why = f"the card changed (now version {item.version})"
        await self._audit_refused(item, by, {"decision": decision.kind, "why": why}, now)
        await self.ctx.store.show_again(item.id, now=now)
        self.ctx.wake_outbox()

    async def _audit_refused(
        self, item: Item, by: Principal, detail: Mapping[str, str], now: datetime
    ) -> None:
        await self.ctx.store.audit(
            action="decision_refused",
            actor=by.actor,
            channel=by.channel,
            now=now,
            run_id=item.run_id,
            item_id=item.id,
            detail=dict(detail),
        )

    async def _final_args(self, item: Item, decision: Decision) -> dict[str, Any] | None:
        """The arguments the call runs with after this decision (None: it does not run),
        once an edit or a grant is found valid."""
        if item.kind is ItemKind.QUESTION:
            return self._answer(item, decision)
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
                await self._check_rules(item, args)
                return args
            case Reject():
                return None
            case Approve(grant=grant):
                if grant is not None:
                    self._check_grant(item, grant)
                return item.args
            case Expired():
                raise InvalidArguments({"": "only the clock expires an item"})
            case _:
                assert_never(decision)

    def _answer(self, item: Item, decision: Decision) -> dict[str, Any] | None:
        """The values a decision answers a question with (None: declined). Accepting checks
        the values against the question's form; a link question is accepted as it is."""
        link = question_url(item) is not None
        match decision:
            case Edit(args=values):
                if link:
                    raise InvalidArguments({"": "a link is accepted or declined, not edited"})
                values = with_defaults(item.schema, values)
                self._check_answer(item, values)
                return values
            case Approve(grant=grant):
                if grant is not None:
                    raise InvalidArguments({"grant": "no grant is offered for a question"})
                values = dict(item.args or {})
                if not link:
                    values = with_defaults(item.schema, values)
                    self._check_answer(item, values)
                return values
            case Reject():
                return None
            case Expired():
                raise InvalidArguments({"": "only the clock expires an item"})
            case _:
                assert_never(decision)

    @staticmethod
    def _check_answer(item: Item, values: dict[str, Any]) -> None:
        errors = validate_answer(item.schema or {}, values)
        if errors:
            raise InvalidArguments(errors)

    async def _record(
        self,
        item: Item,
        decision: Decision,
        args_before: dict[str, Any] | None,
        final_args: dict[str, Any] | None,
        *,
        by: Principal,
        now: datetime,
        ends: RunEnd | None = None,
    ) -> Item:
        """Record the decision with its event, for the version of the item it was made on;
        the first decision wins (`AlreadyDecided`). A request's run ends with it (`ends`)."""
        event = NewEvent(
            DecisionMade(
                item_id=item.id,
                call_id=item.call_id,
                decision=decision,
                args_before=args_before,
                args=final_args,
                actor=by.actor,
                channel=by.channel,
            )
        )
        counted = self._required(item) > 1 and isinstance(decision, Approve | Edit)
        return await self.ctx.store.record_decision(
            item.id,
            decision,
            actor=by.actor,
            channel=by.channel,
            now=now,
            final_args=final_args,
            event=event,
            ends=ends,
            # A reached count may have moved the version on (an edit on the way): the count
            # itself was taken at the version each person saw.
            version=None if counted else item.version,
        )

    def _required(self, item: Item) -> int:
        if item.kind is ItemKind.QUESTION:
            return 1  # a question is answered by one person
        return required_for(
            item, self.ctx.skills.get(item.skill) if item.skill in self.ctx.skills else None
        )

    async def _count(self, item: Item, decision: Approve | Edit, *, by: Principal) -> Count:
        """Count a person's approval (or edit) of an item that needs more than one
        (`pizzabot.agent.policy.quorum`), at the version of the item they saw."""
        required = self._required(item)
        if self.ctx.approvals is None:
            why = f"{item.tool} needs {required} people's approval; this server keeps no count"
            raise InvalidArguments({"": why})
        skill = self.ctx.skills.get(item.skill) if item.skill in self.ctx.skills else None
        edited = decision.args if isinstance(decision, Edit) else None
        try:
            return await count(
                self.ctx.approvals,
                self.ctx.store,
                item,
                skill=skill,
                required=required,
                who=by,
                now=self.ctx.clock(),
                edited=edited,
                # The card stays open with the edited arguments: its preview is made anew.
                preview=None
                if edited is None
                else await edited_preview(self.ctx.previews, skill, item, edited),
            )
        except CardChanged as exc:
            await self._changed(exc.item, decision, by=by, now=self.ctx.clock())
            raise

    def _check_grant(self, item: Item, choice: str) -> None:
        """Refuse a grant the card did not offer: the tool's `grants` (none where it needs
        more than one approver, or where this server keeps no grants)."""
        offers = item.risk.grants if self.ctx.grants is not None else ()
        if item.kind is not ItemKind.TOOL or not offers:
            raise InvalidArguments({"grant": "no grant is offered for this item"})
        if not any(same_choice(choice, o) for o in offers):
            raise InvalidArguments(
                {"grant": f"{choice!r} is not offered for {item.tool}: {', '.join(offers)}"}
            )

    async def _check_rules(self, item: Item, args: dict[str, Any]) -> None:
        """Refuse an edit the skill's rules deny: they hold for the arguments that will run.
        (The skill is the version the run started with, as the engine uses.)"""
        if item.tool is None:
            return
        try:
            run = await self.ctx.store.get_run(item.run_id)
            skill = self.ctx.skills.for_run(item.skill, run.created_at)
        except NotFound:
            return  # the run's skill is gone: the run ends without running the call
        ruling = judge(skill, item.tool, args)
        if ruling.policy == "deny":
            said = f": {ruling.reason}" if ruling.reason else ""
            raise InvalidArguments({"": f"{ruling.why} denies these arguments{said}"})

    async def expire(self, item_id: str, *, reason: str, halt: bool = False) -> Item:
        """Close an action nobody answered in time, as if the clock had rejected it."""
        store, now = self.ctx.store, self.ctx.clock()
        item = await store.get_item(item_id)
        expired = Expired(reason=reason, halt=halt)
        event = NewEvent(
            DecisionMade(
                item_id=item_id,
                call_id=item.call_id,
                decision=expired,
                actor="timeout",
                channel="timer",
            )
        )
        ends = request_end(item, expired, None, by="timeout", via="timer")
        decided = await store.record_decision(
            item_id,
            expired,
            actor="timeout",
            channel="timer",
            now=now,
            final_args=None,
            event=event,
            status=ItemStatus.EXPIRED,
            ends=ends,
        )
        # A requester's run ended with it: then no worker has work.
        if ends is None or not await request_ended(
            self.ctx, decided, expired, by="timeout", via="timer"
        ):
            self.ctx.wake_workers()
        self.ctx.decisions.ring(decided.run_id)
        self.ctx.wake_outbox()
        return decided

    async def mark_read(self, item_id: str) -> Item:
        return await self.ctx.store.mark_read(item_id, now=self.ctx.clock())
