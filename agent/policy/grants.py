"""Grants: "approve, and don't ask again for …", as rows that can be revoked.

Next to Approve, an approver may choose a grant the tool offers (`ToolRule.grants`):

- `run`: this tool, for the rest of this run (any arguments);
- a duration such as `1h` or `8h`: this tool, in any run of this skill, until it expires;
- `exact`: this tool with these exact arguments, in any run of this skill, until revoked.

A grant only ever stands in for a person's `ask`: the engine consults grants after the
skill's rules, so a rule's `deny` still denies. None is offered where the tool needs more
than one approver, where its entry says `grants: []`, or where the server keeps no grants.

This module is the policy's part: the `Grant` noun, which grants a tool offers (`offered`),
whether a grant covers a call (`covers`, `covering`) and the fingerprint of exact arguments
(canonical JSON, SHA-256). Where grants are kept is the `Grants` protocol; `pizzabot.store.grants`
implements it in SQL, writing the audit trail (created, used, revoked) with each change.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal, Protocol, assert_never

from pizzabot.agent.errors import NotAllowed
from pizzabot.agent.policy.access import Access, audit_refusal
from pizzabot.agent.policy.principal import Principal
from pizzabot.agent.policy.rules import judge
from pizzabot.agent.skills import Skill, ToolRule, parse_duration
from pizzabot.agent.step_up import step_up_for
from pizzabot.agent.store import AuditTrail

__all__ = [
    "Grant",
    "Grants",
    "Scope",
    "covering",
    "covers",
    "fingerprint",
    "make_grant",
    "offered",
    "revoke_grant",
    "same_choice",
    "scope_of",
]

#: What a grant covers: this run; this skill for a while; these arguments.
Scope = Literal["run", "duration", "exact"]


@dataclass(frozen=True)
class Grant:
    """One grant: who granted it, how (`choice`: "run", "1h", "exact"), for which tool and
    skill, and until when. `run_id` is the run it was granted in (for `run`, the only run it
    covers); `fingerprint` the exact arguments' (for `exact`), `args` those arguments."""

    id: str
    skill: str
    tool: str
    choice: str
    granted_by: str
    granted_via: str
    granted_at: datetime
    run_id: str
    item_id: str
    fingerprint: str | None = None
    args: dict[str, Any] | None = None
    expires_at: datetime | None = None
    revoked_at: datetime | None = None
    revoked_by: str | None = None
    #: Calls that ran under it, and the last time one did.
    uses: int = 0
    last_used_at: datetime | None = None

    @property
    def scope(self) -> Scope:
        return scope_of(self.choice)

    def holds(self, now: datetime) -> bool:
        """Neither revoked nor expired at `now`."""
        return self.revoked_at is None and (self.expires_at is None or now < self.expires_at)

    def describe(self) -> str:
        """What it covers, in words ("crm.refund for the rest of run 7f3a…")."""
        match self.scope:
            case "run":
                return f"{self.tool} for the rest of run {self.run_id}"
            case "duration":
                return f"{self.tool} in skill {self.skill} for {self.choice}"
            case "exact":
                return f"{self.tool} with these exact arguments in skill {self.skill}"
            case _:
                assert_never(self.scope)


class Grants(Protocol):
    """Where grants are kept. Each change writes its audit entry in the same transaction."""

    async def add(self, grant: Grant) -> Grant:
        """Record a grant, audited "grant created"; once per item: adding a second grant for
        the same item returns the first."""
        ...

    async def for_call(self, *, skill: str, tool: str, run_id: str, now: datetime) -> list[Grant]:
        """The grants that hold at `now` and may cover a call of `tool` in `run_id` (that
        run's `run` grants and the skill's others), oldest first."""
        ...

    async def used(self, grant: Grant, *, run_id: str, call_id: str, now: datetime) -> None:
        """A call ran under `grant`: count it, audited "grant used"."""
        ...

    async def get(self, grant_id: str) -> Grant:
        """The grant, or `NotFound`."""
        ...

    async def list_grants(self, *, now: datetime, ended: bool = False) -> list[Grant]:
        """The grants that hold at `now`, newest first; with `ended`, revoked and expired
        ones too."""
        ...

    async def revoke(self, grant_id: str, *, actor: str, channel: str, now: datetime) -> Grant:
        """End a grant from the next call on, audited "grant revoked"; a grant revoked before
        is returned as it is. `NotFound` for an unknown id."""
        ...


def scope_of(choice: str) -> Scope:
    if choice == "run":
        return "run"
    if choice == "exact":
        return "exact"
    return "duration"


def same_choice(a: str, b: str) -> bool:
    """Two ways of writing one choice ("1h" and "60m" are the same duration)."""
    if scope_of(a) != "duration" or scope_of(b) != "duration":
        return a == b
    try:
        return parse_duration(a) == parse_duration(b)
    except ValueError:
        return False


def _required_approvals(rule: ToolRule) -> int:
    """How many people must approve a call of the tool (one unless the skill says more)."""
    approvals = getattr(rule, "approvals", None)
    required = getattr(approvals, "required", 1) if approvals is not None else 1
    return required if isinstance(required, int) else 1


def offered(skill: Skill, tool: str) -> tuple[str, ...]:
    """The grants a card for `tool` ("server.tool") offers next to Approve: the tool's
    `grants` (by default `run`, `1h` and `exact`), none where it needs more than one
    approver, or a passkey (`pizzabot.agent.step_up`: a grant would skip it next time)."""
    rule = skill.rule(tool)
    if _required_approvals(rule) > 1 or step_up_for(skill, tool, None, rule.risk) is not None:
        return ()
    return tuple(rule.grants)


async def revoke_grant(
    grants: Grants,
    access: Access,
    trail: AuditTrail,
    grant_id: str,
    *,
    by: Principal,
    now: datetime,
) -> Grant:
    """Revoke a grant for `by`, if the policy lets them (`Access.may_revoke`: an admin, or
    an approver of its tool); a refusal is audited and raised as `NotAllowed`."""
    grant = await grants.get(grant_id)
    verdict = access.may_revoke(by, grant.skill, grant.tool)
    if not verdict:
        await audit_refusal(
            trail, verdict, now=now, run_id=grant.run_id, detail={"grant": grant.id}
        )
        raise NotAllowed(f"{by.describe()} may not revoke grant {grant.id}: {verdict.why}")
    return await grants.revoke(grant_id, actor=by.actor, channel=by.channel, now=now)


def fingerprint(args: Mapping[str, Any]) -> str:
    """The exact arguments' SHA-256, over canonical JSON (keys sorted, no spaces): the same
    arguments in any order give the same fingerprint, any other value another one."""
    canonical = json.dumps(
        args, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def make_grant(
    choice: str,
    *,
    id: str,
    skill: str,
    tool: str,
    args: Mapping[str, Any],
    run_id: str,
    item_id: str,
    granted_by: str,
    granted_via: str,
    now: datetime,
) -> Grant:
    """The grant an approval with `choice` makes, for the call it approved."""
    scope = scope_of(choice)
    exact = scope == "exact"
    expires = now + timedelta(seconds=parse_duration(choice)) if scope == "duration" else None
    return Grant(
        id=id,
        skill=skill,
        tool=tool,
        choice=choice,
        granted_by=granted_by,
        granted_via=granted_via,
        granted_at=now,
        run_id=run_id,
        item_id=item_id,
        fingerprint=fingerprint(args) if exact else None,
        args=dict(args) if exact else None,
        expires_at=expires,
    )


def covers(
    grant: Grant, *, skill: str, tool: str, run_id: str, args: Mapping[str, Any], now: datetime
) -> bool:
    """Whether `grant` lets this call run without asking, at `now`."""
    if not grant.holds(now) or grant.skill != skill or grant.tool != tool:
        return False
    match grant.scope:
        case "run":
            return grant.run_id == run_id
        case "duration":
            return True
        case "exact":
            return grant.fingerprint == fingerprint(args)
        case _:
            assert_never(grant.scope)


def covering(
    grants: Iterable[Grant],
    *,
    skill: Skill,
    tool: str,
    run_id: str,
    args: Mapping[str, Any],
    now: datetime,
) -> Grant | None:
    """The first of `grants` that covers the call, among those the tool still offers under
    `skill` (the version the run uses): a tool that stopped offering a grant, or that now
    needs two approvers or a passkey (for these arguments too), is asked about again."""
    still = offered(skill, tool)
    if still and step_up_for(skill, tool, judge(skill, tool, args), skill.rule(tool).risk):
        return None  # a rule that asks for a passkey: asked every time
    for grant in grants:
        if not any(same_choice(grant.choice, c) for c in still):
            continue
        if covers(grant, skill=skill.name, tool=tool, run_id=run_id, args=args, now=now):
            return grant
    return None
