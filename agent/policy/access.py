"""Who may do what: decide an item, start or follow up a run, revoke a grant, manage tokens,
work the kill switch. Every one of these passes here, in the engine, whichever way it came in.

The asker is a `Principal` (`pizzabot.agent.policy.principal`); a channel only says who it is. The rules:

- The **owner** and an **admin** token may do everything.
- An **ask** token may do none of these: it files requests and reads its own
  (`pizzabot.agent.requests`), and that is all. A **system** trigger (a schedule, a webhook) may start
  runs, and nothing else.
- **Deciding** an item: the skill's approvers, and for a tool's item also the approvers that
  tool escalates to (`pizzabot.agent.skills.Escalation`). A person on Slack or by mail counts by their
  identity there, and one signed in on the web page by a mail link by that address; a
  **decide** token counts as the person it names (`people:`), through every identity that
  person has.
- **Following up** a run, and **revoking** a grant: the approvers of its skill (of the grant's
  tool) in the same way.
- **Starting** a run: on a chat channel (Slack, Teams, Discord, Telegram), whoever approves
  some skill on that channel; by email, the allowed senders the composition root hands over
  (`email_senders`); a decide token, for the skills its person approves.
- **Tokens** and the **kill switch**: admins only.
- Lists fail closed: no approvers, nobody; a skill that is not loaded, nobody.

Identities compare as `pizzabot.agent.policy.identity` says: exactly, after one strict normalisation
per channel (`same_identity`), the one comparison every act uses. A refused attempt is
written to the audit trail by `audit_refusal`, as `<act>_refused` with the principal, its
channel and the verdict's wording.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pizzabot.agent.model import Box, Item
from pizzabot.agent.policy.identity import (
    DISCORD,
    EMAIL,
    SLACK,
    TEAMS,
    TELEGRAM,
    identity_key,
    same_identity,
)
from pizzabot.agent.policy.principal import Principal, Scope
from pizzabot.agent.policy.rules import asking_rule
from pizzabot.agent.skills import Skill, SkillBook
from pizzabot.agent.store import AuditTrail

#: Channels where people act under their own identity, which the skills' lists name.
PEOPLE_CHANNELS = frozenset({SLACK, EMAIL, TEAMS, DISCORD, TELEGRAM})
#: People channels where whoever approves some skill there may start runs there.
CHAT_CHANNELS = frozenset({SLACK, TEAMS, DISCORD, TELEGRAM})

_ADMIN = "an admin (the owner, or a token with scope admin)"
_APPROVER = "an approver of this item"
_NOT_APPROVER = "not an approver of this item"
_STARTER = "may start runs through this channel"
_NOT_STARTER = "may not start runs through this channel"
_NO_SKILL = "the skill is not loaded"
_SYSTEM_STARTS = "a trigger starts the runs it was set up to start"
_NOT_ADMIN = "only an admin may do this"


class Act(enum.StrEnum):
    """What someone asks to do; the value names the audit entry of a refusal."""

    DECIDE = "decision"
    START = "start"
    FOLLOW_UP = "follow_up"
    REVOKE = "grant_revoke"
    TOKENS = "tokens"
    CONTROL = "control"
    #: A route the caller's token scope does not reach at all (`scope_refused`).
    SCOPE = "scope"


@dataclass(frozen=True)
class Verdict:
    """The answer to one question, and which rule gave it (`why`: the audit's wording).
    True when allowed."""

    act: Act
    who: Principal
    allowed: bool
    why: str

    def __bool__(self) -> bool:
        return self.allowed

    @property
    def identity(self) -> str:
        return self.who.actor

    @property
    def channel(self) -> str:
        return self.who.channel


async def audit_refusal(
    trail: AuditTrail,
    verdict: Verdict,
    *,
    now: datetime,
    run_id: str | None = None,
    item_id: str | None = None,
    detail: dict[str, Any] | None = None,
) -> None:
    """Write one refused attempt: `<act>_refused` by its principal through its channel, with
    the rule that refused it (`why`) and `detail` (say, the decision that was asked for)."""
    if verdict.allowed:
        raise ValueError("only a refusal is audited as one")
    said: dict[str, Any] = {**(detail or {}), "why": verdict.why}
    if verdict.who.kind == "token":
        said["principal"] = verdict.who.describe()
    await trail.audit(
        action=f"{verdict.act}_refused",
        actor=verdict.who.actor,
        channel=verdict.who.channel,
        now=now,
        run_id=run_id,
        item_id=item_id,
        detail=said,
    )


class Access:
    """The answers, from the loaded skills (read at each question, so a reload counts at
    once) and the people who may start runs by email (`email_senders`)."""

    def __init__(
        self,
        *,
        skills: SkillBook,
        email_senders: Iterable[str] = (),
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.skills = skills
        #: The time a rota's turn and an escalation step are judged at.
        self.clock = clock
        keys = (identity_key(EMAIL, a) for a in email_senders)
        self._email_senders = frozenset(k for k in keys if k is not None)

    def may_decide(self, who: Principal, item: Item) -> Verdict:
        """Whether `who` may approve, edit or reject `item`."""
        if who.is_admin:
            return Verdict(Act.DECIDE, who, True, _ADMIN)
        refused = self._below(Act.DECIDE, who, Scope.DECIDE)
        if refused is not None:
            return refused
        skill = self._skill(item.skill)
        if skill is None:
            return Verdict(Act.DECIDE, who, False, _NO_SKILL)
        asked = asking_rule(skill, item.tool, item.args)
        return self._among(Act.DECIDE, who, skill, item.tool, asked_at=item.created_at, asked=asked)

    def may_follow_up(self, who: Principal, skill: str) -> Verdict:
        """Whether `who` may send a run of `skill` a message."""
        if who.is_admin:
            return Verdict(Act.FOLLOW_UP, who, True, _ADMIN)
        refused = self._below(Act.FOLLOW_UP, who, Scope.DECIDE)
        if refused is not None:
            return refused
        found = self._skill(skill)
        if found is None:
            return Verdict(Act.FOLLOW_UP, who, False, _NO_SKILL)
        return self._among(Act.FOLLOW_UP, who, found, None)

    def may_start(self, who: Principal, skill: str | None = None) -> Verdict:
        """Whether `who` may start a run (of `skill`, where the right depends on it)."""
        if who.is_admin:
            return Verdict(Act.START, who, True, _ADMIN)
        if who.kind == "system":
            return Verdict(Act.START, who, True, _SYSTEM_STARTS)
        refused = self._below(Act.START, who, Scope.DECIDE)
        if refused is not None:
            return refused
        if who.kind == "token":
            found = self._skill(skill) if skill is not None else None
            ok = found is not None and self._approves(who, found, None)
            return Verdict(Act.START, who, ok, _STARTER if ok else _NOT_STARTER)
        key = identity_key(who.namespace, who.identity)
        ok = key is not None and key in self.starters(who.namespace)
        return Verdict(Act.START, who, ok, _STARTER if ok else _NOT_STARTER)

    def may_revoke(self, who: Principal, skill: str, tool: str) -> Verdict:
        """Whether `who` may see and revoke a grant for `tool` of `skill`: an admin, or one
        of the approvers of that tool."""
        if who.is_admin:
            return Verdict(Act.REVOKE, who, True, _ADMIN)
        refused = self._below(Act.REVOKE, who, Scope.DECIDE)
        if refused is not None:
            return refused
        found = self._skill(skill)
        if found is None:
            return Verdict(Act.REVOKE, who, False, _NO_SKILL)
        return self._among(Act.REVOKE, who, found, tool)

    def may_manage_tokens(self, who: Principal) -> Verdict:
        """Whether `who` may make, list and revoke tokens: admins only."""
        return Verdict(Act.TOKENS, who, who.is_admin, _ADMIN if who.is_admin else _NOT_ADMIN)

    def may_control(self, who: Principal) -> Verdict:
        """Whether `who` may turn the kill switch on or off, cancel any run, reload the
        skills: admins only."""
        return Verdict(Act.CONTROL, who, who.is_admin, _ADMIN if who.is_admin else _NOT_ADMIN)

    def starters(self, channel: str) -> frozenset[str]:
        """Everyone who may start runs through `channel`, in their compared form."""
        if channel in CHAT_CHANNELS:
            found = (
                identity_key(channel, u)
                for s in self.skills.all()
                for u in s.approvers_for(None, channel)
            )
            return frozenset(k for k in found if k is not None)
        if channel == EMAIL:
            return self._email_senders
        return frozenset()

    def knows(self, who: Principal) -> bool:
        """Whether `who` is someone the bot answers: an approver of some skill, or someone
        who may start runs. Strangers get no answer."""
        if self.may_start(who):
            return True
        return any(self._approves(who, s, None) for s in self.skills.all())

    def may_see(self, who: Principal, item: Item) -> bool:
        """Whether `item` is for `who`: an action they may decide, or a run's note for its
        skill's approvers and whoever it is delivered to on that channel."""
        if item.box is Box.ACTION or who.is_admin:
            return bool(self.may_decide(who, item))
        skill = self._skill(item.skill)
        if skill is None or who.kind == "system":
            return False
        if self._approves(who, skill, None):
            return True
        deliver = skill.deliver
        targets = {
            SLACK: [deliver.slack or ""],
            EMAIL: deliver.email,
            TEAMS: [deliver.teams or ""],
            DISCORD: [deliver.discord or ""],
            TELEGRAM: [deliver.telegram or ""],
        }
        return who.kind == "person" and any(
            same_identity(who.namespace, who.identity, t) for t in targets.get(who.namespace, [])
        )

    def _skill(self, name: str) -> Skill | None:
        return self.skills.get(name) if name in self.skills else None

    @staticmethod
    def _below(act: Act, who: Principal, needed: Scope) -> Verdict | None:
        """A refusal when `who`'s kind or scope cannot reach `needed` at all."""
        if who.kind == "system":
            return Verdict(act, who, False, f"{who.channel} is a trigger, not a person")
        if not who.scope.covers(needed):
            return Verdict(
                act, who, False, f"a token of scope {who.scope} may only {who.scope.allows()}"
            )
        if who.kind == "token" and not who.person:
            return Verdict(act, who, False, "this token names no person (give it --person)")
        return None

    def _among(
        self,
        act: Act,
        who: Principal,
        skill: Skill,
        tool: str | None,
        *,
        asked_at: datetime | None = None,
        asked: int | None = None,
    ) -> Verdict:
        ok = self._approves(who, skill, tool, asked_at=asked_at, asked=asked)
        return Verdict(act, who, ok, _APPROVER if ok else _NOT_APPROVER)

    def _approves(
        self,
        who: Principal,
        skill: Skill,
        tool: str | None,
        *,
        asked_at: datetime | None = None,
        asked: int | None = None,
    ) -> bool:
        """Whether `who` is among the approvers of `tool` (None: the skill's own) in `skill`
        now (a rota's turn; for an item asked at `asked_at`, the escalation steps that have
        come, of the ladder of rule `asked` where it has one): a person by their identity on
        their channel; a token as the person it names, by name or by any identity that person
        has in `skill.people`."""
        when: dict[str, Any] = {"at": self.clock(), "asked_at": asked_at, "asked": asked}
        if who.kind == "person":
            if who.namespace not in PEOPLE_CHANNELS:
                return False
            listed = skill.approvers_for(tool, who.namespace, **when)
            return any(same_identity(who.namespace, who.identity, a) for a in listed)
        if who.kind != "token" or not who.person:
            return False
        person = skill.people.get(who.person)
        if person is None:
            return False
        if who.person in skill.approver_names(tool, **when):
            return True
        return any(
            same_identity(channel, person.on(channel), a)
            for channel in PEOPLE_CHANNELS
            for a in skill.approvers_for(tool, channel, **when)
        )
