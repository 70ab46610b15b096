"""Who may do what through which channel: decide an item, start a run, follow a run up.

Channels ask here and only translate the answer into their protocol (an ephemeral note, a
form error, a mail back); nothing else decides it. The rules:

- The web page, the API and the CLI act as the owner, who holds the API token: the owner may
  decide, start and follow up anything.
- Deciding an item: the skill's approvers on that channel, and for a tool's item also the
  approvers that tool escalates to (`agent.skills.Escalation`). A budget item has no tool.
- Following up a run: the skill's approvers on that channel.
- Starting a run: on Slack, whoever approves some skill on Slack; by email, the allowed
  senders the composition root hands over (`email_senders`).
- Lists fail closed: no approvers, nobody; a skill that is not loaded, nobody; a channel
  with no people (a timer, a webhook), nobody.

Identities compare as `agent.policy.identity` says: exactly, after one strict normalisation
per channel. A refused attempt is written to the audit trail by `audit_refusal`, as
`<act>_refused` with the verdict's one wording, whichever channel it came through.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from agent.model import Box, Item
from agent.policy.identity import EMAIL, SLACK, identity_key
from agent.skills import Skill, SkillBook
from agent.store import AuditTrail

#: Channels whose actor is the owner of the API token: the owner may do anything.
OWNER_CHANNELS = frozenset({"api", "web", "cli"})
#: Channels where people act under their own identity, which the lists below name.
PEOPLE_CHANNELS = frozenset({SLACK, EMAIL})

_OWNER = "the owner (holds the API token)"
_APPROVER = "an approver for this channel"
_NOT_APPROVER = "not an approver for this channel"
_STARTER = "may start runs through this channel"
_NOT_STARTER = "may not start runs through this channel"
_NO_SKILL = "the skill is not loaded"


class Act(enum.StrEnum):
    """What someone asks to do; the value names the audit entry of a refusal."""

    DECIDE = "decision"
    START = "start"
    FOLLOW_UP = "follow_up"


@dataclass(frozen=True)
class Verdict:
    """The answer to one question, and which rule gave it (`why`: the audit's wording).
    True when allowed."""

    act: Act
    identity: str
    channel: str
    allowed: bool
    why: str

    def __bool__(self) -> bool:
        return self.allowed


async def audit_refusal(
    trail: AuditTrail,
    verdict: Verdict,
    *,
    now: datetime,
    run_id: str | None = None,
    item_id: str | None = None,
    detail: dict[str, Any] | None = None,
) -> None:
    """Write one refused attempt: `<act>_refused` by its identity through its channel, with
    the rule that refused it (`why`) and `detail` (say, the decision that was asked for)."""
    if verdict.allowed:
        raise ValueError("only a refusal is audited as one")
    await trail.audit(
        action=f"{verdict.act}_refused",
        actor=verdict.identity,
        channel=verdict.channel,
        now=now,
        run_id=run_id,
        item_id=item_id,
        detail={**(detail or {}), "why": verdict.why},
    )


class Access:
    """The answers, from the loaded skills (read at each question, so a reload counts at
    once) and the people who may start runs by email (`email_senders`)."""

    def __init__(self, *, skills: SkillBook, email_senders: Iterable[str] = ()) -> None:
        self.skills = skills
        keys = (identity_key(EMAIL, a) for a in email_senders)
        self._email_senders = frozenset(k for k in keys if k is not None)

    def may_decide(self, identity: str, channel: str, item: Item) -> Verdict:
        """Whether `identity` may approve, edit or reject `item` through `channel`."""
        if channel in OWNER_CHANNELS:
            return Verdict(Act.DECIDE, identity, channel, True, _OWNER)
        skill = self._skill(item.skill)
        if skill is None:
            return Verdict(Act.DECIDE, identity, channel, False, _NO_SKILL)
        return self._among(Act.DECIDE, identity, channel, self._approvers(skill, channel, item))

    def may_follow_up(self, identity: str, channel: str, skill: str) -> Verdict:
        """Whether `identity` may send a run of `skill` a message through `channel`."""
        if channel in OWNER_CHANNELS:
            return Verdict(Act.FOLLOW_UP, identity, channel, True, _OWNER)
        found = self._skill(skill)
        if found is None:
            return Verdict(Act.FOLLOW_UP, identity, channel, False, _NO_SKILL)
        return self._among(Act.FOLLOW_UP, identity, channel, self._approvers(found, channel))

    def may_start(self, identity: str, channel: str, skill: str | None = None) -> Verdict:
        """Whether `identity` may start runs through `channel`. The right is per channel, so
        it is the same for every `skill` (which skills exist is the runs' business)."""
        del skill  # starting rights do not depend on the skill (yet)
        if channel in OWNER_CHANNELS:
            return Verdict(Act.START, identity, channel, True, _OWNER)
        key = identity_key(channel, identity)
        ok = channel in PEOPLE_CHANNELS and key is not None and key in self.starters(channel)
        return Verdict(Act.START, identity, channel, ok, _STARTER if ok else _NOT_STARTER)

    def starters(self, channel: str) -> frozenset[str]:
        """Everyone who may start runs through `channel`, in their compared form."""
        if channel == SLACK:
            found = (
                identity_key(SLACK, u)
                for s in self.skills.all()
                for u in s.approvers_for(None, SLACK)
            )
            return frozenset(k for k in found if k is not None)
        if channel == EMAIL:
            return self._email_senders
        return frozenset()

    def knows(self, identity: str, channel: str) -> bool:
        """Whether `identity` is someone the bot answers through `channel`: an approver of
        some skill there, or someone who may start runs there. Strangers get no answer."""
        if self.may_start(identity, channel):
            return True
        return any(
            self._among(Act.DECIDE, identity, channel, self._approvers(s, channel))
            for s in self.skills.all()
        )

    def may_see(self, identity: str, channel: str, item: Item) -> bool:
        """Whether `item` is for `identity` on `channel`: an action they may decide, or a
        run's note for its skill's approvers and whoever it is delivered to there."""
        if item.box is Box.ACTION or channel in OWNER_CHANNELS:
            return bool(self.may_decide(identity, channel, item))
        skill = self._skill(item.skill)
        if skill is None:
            return False
        targets = {SLACK: [skill.deliver.slack or ""], EMAIL: skill.deliver.email}
        people = [*self._approvers(skill, channel), *targets.get(channel, [])]
        return bool(self._among(Act.FOLLOW_UP, identity, channel, people))

    def _skill(self, name: str) -> Skill | None:
        return self.skills.get(name) if name in self.skills else None

    @staticmethod
    def _approvers(skill: Skill, channel: str, item: Item | None = None) -> list[str]:
        if channel not in PEOPLE_CHANNELS:
            return []
        return skill.approvers_for(item.tool if item is not None else None, channel)

    @staticmethod
    def _among(act: Act, identity: str, channel: str, people: Iterable[str]) -> Verdict:
        key = identity_key(channel, identity)
        ok = key is not None and any(key == identity_key(channel, p) for p in people)
        return Verdict(act, identity, channel, ok, _APPROVER if ok else _NOT_APPROVER)
