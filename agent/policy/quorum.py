"""Two-person approval: a tool whose calls need `approvals.required` different people.

A count counts people, not accounts. `Skill.people` names each person's identity on each
channel, so alice on Slack and alice by email approve once, and a `decide` token that names
alice is alice too. The holder of the API token (the owner principal) is the person named
`owner`; a skill that lists an `owner` under `people` gives that person identities on the
channels too. An identity that no person lists counts as a person of its own.

The rules of one item's count:

- each approval by a different person counts; the same person again is refused
  (`AlreadyApproved`, audited as `approval_refused`) and not counted;
- the person who filed a request never counts toward it (`pizzabot.agent.inbox` refuses them);
- an edit replaces the arguments and starts a new count, the editor's approval its first;
- the call is approved when the count reaches `required` (an edit on the way makes it an
  edited call, as the model must see the call that runs); one reject ends the item, through
  the inbox's ordinary path, as do time-outs, reminders and escalation, which apply to the
  item as a whole.

`Approvals` is where counts are kept (`pizzabot.store.approvals`: a row per counted approval, written
with its audit entry, the item's copies marked to show the new count); `count` is what
`pizzabot.agent.inbox.Inbox.decide` calls for an approval or an edit of such an item.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from pizzabot.agent.errors import AlreadyApproved
from pizzabot.agent.model import Approve, Decision, Edit, Item, Preview
from pizzabot.agent.policy.identity import identity_key, same_identity
from pizzabot.agent.policy.principal import Principal, Scope
from pizzabot.agent.skills import Skill
from pizzabot.agent.store import AuditTrail

__all__ = [
    "OWNER",
    "Approval",
    "Approvals",
    "Count",
    "count",
    "person_of",
    "required_for",
]

#: The person who decides through the web page, the API and the CLI.
OWNER = "owner"

_CHANNEL_NAMES = {
    "slack": "Slack",
    "email": "email",
    "teams": "Teams",
    "discord": "Discord",
    "telegram": "Telegram",
    "web": "the web page",
    "api": "the API",
    "cli": "the CLI",
}


def person_of(skill: Skill | None, who: Principal) -> str:
    """The person `who` is: `owner` for the owner (and an admin token naming nobody), the
    person a token names, a name from the skill's `people` for a channel identity it lists,
    else the principal itself as `channel:identity` or `token:NAME` (a person's name has no
    colon, so the two never meet)."""
    match who.kind:
        case "owner":
            return OWNER
        case "token":
            if who.person:
                return who.person
            # An admin token that names nobody acts for the owner: with the owner's own token
            # it is one person, never two.
            return OWNER if who.scope is Scope.ADMIN else f"token:{who.identity}"
        case "system":
            return f"{who.channel}:{who.identity}"
    if skill is not None:
        for name, person in skill.people.items():
            if same_identity(who.namespace, person.on(who.namespace), who.identity):
                return name
    ns = who.namespace
    return f"{ns}:{identity_key(ns, who.identity) or who.identity}"


def required_for(item: Item, skill: Skill | None) -> int:
    """How many people must approve `item`: what its card said when it was asked, or more
    where the skill now asks more (a reload never lowers a pending item's count)."""
    asked = item.risk.approvals_required or 1
    now = skill.approvals_required(item.tool) if skill is not None else 1
    return max(asked, now)


@dataclass(frozen=True)
class Approval:
    """One person's counted approval: who (`person`), through which channel, as which
    identity there, and when."""

    person: str
    channel: str
    identity: str
    at: datetime

    @property
    def name(self) -> str:
        """The person as shown: their name, or the identity of an unnamed one."""
        return self.person.partition(":")[2] or self.person

    def shown(self) -> str:
        """The approval as a card shows it: alice via Slack."""
        return f"{self.name} via {_CHANNEL_NAMES.get(self.channel, self.channel)}"


@dataclass(frozen=True)
class Count:
    """An item's current count: `approvals` since the last edit (oldest first, one per
    person), `edits` made while counting, the arguments now asked about (`args`) and, after
    an edit, those first proposed (`proposal`)."""

    required: int
    approvals: tuple[Approval, ...]
    args: dict[str, Any] | None
    edits: int = 0
    proposal: dict[str, Any] | None = None

    @property
    def reached(self) -> bool:
        return len(self.approvals) >= self.required

    def shown(self) -> tuple[str, ...]:
        return tuple(a.shown() for a in self.approvals)

    def text(self) -> str:
        """The count as a card shows it: 1 of 2 approved: alice via Slack."""
        said = f"{len(self.approvals)} of {self.required} approved"
        return f"{said}: {', '.join(self.shown())}" if self.approvals else said

    def decision(self) -> tuple[Decision, dict[str, Any] | None]:
        """The decision a reached count makes, and the arguments first proposed: an edited
        call when an edit came on the way, so the run uses (and the model sees) those."""
        if self.edits:
            return Edit(args=dict(self.args or {})), self.proposal
        return Approve(), self.args


class Approvals(Protocol):
    """Where counts are kept."""

    async def add(
        self,
        item_id: str,
        approval: Approval,
        *,
        required: int,
        args: dict[str, Any] | None = None,
        version: int | None = None,
        preview: Preview | None = None,
    ) -> Count:
        """Count `approval` of a pending item, in one transaction with its audit entry
        (`approval`), the item's card showing the new count and its sent copies marked for
        update. With `args` (an edit) the item's arguments are replaced, its version bumped,
        its preview replaced by `preview`, and a new count starts with this approval. Raise AlreadyApproved when the person is
        counted already (unless the count is reached: a retry after a crash then finishes
        it), AlreadyDecided when the item is no longer pending, CardChanged when `version`
        is given and the item is no longer at it."""
        ...


async def count(
    approvals: Approvals,
    trail: AuditTrail,
    item: Item,
    *,
    skill: Skill | None,
    required: int,
    who: Principal,
    now: datetime,
    edited: dict[str, Any] | None = None,
    preview: Preview | None = None,
) -> Count:
    """Count `who`'s approval (with `edited` arguments: their edit, and its `preview`) of
    `item`, as the version of it they saw; a person counted already is refused, and the
    refusal audited."""
    approval = Approval(person_of(skill, who), who.channel, who.actor, now)
    try:
        return await approvals.add(
            item.id, approval, required=required, args=edited, version=item.version,
            preview=preview,
        )  # fmt: skip
    except AlreadyApproved as exc:
        await trail.audit(
            action="approval_refused",
            actor=who.actor,
            channel=who.channel,
            now=now,
            run_id=item.run_id,
            item_id=item.id,
            detail={"person": approval.person, "why": "counted already", "count": exc.count},
        )
        raise
