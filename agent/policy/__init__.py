"""Policy: what the engine allows, decided in one place so that no channel decides it.

`principal` says who is asking (the owner, a named token and its scope, a person on a
channel, a trigger); `access` answers "may this principal decide / start / follow up /
revoke / manage tokens" and writes refusals to the audit trail; `tokens` makes, lists and
revokes named tokens. Channels only say who is asking.

`rules` answers "auto, notify, ask or deny, and why" for one tool call: the skill's rules on its
argument values, the tool's policy, and (where the skill opts in) the tool's own hints.
`call_verdict` adds the grants that may cover the call and the card a person would see: the
one verdict the engine's calls and requests from outside agents share.

`away` lets a person who is away name a delegate, who decides what they may decide, as
"bob for alice"; `away_desk` is where one says one is away or back.
"""

from pizzabot.agent.policy.access import Access, Act, Verdict, audit_refusal
from pizzabot.agent.policy.identity import (
    DISCORD,
    EMAIL,
    SLACK,
    TEAMS,
    TELEGRAM,
    identity_key,
    normalize_address,
    same_identity,
)
from pizzabot.agent.policy.principal import Principal, Scope
from pizzabot.agent.policy.rules import Ruling, ToolHints, check_paths, judge
from pizzabot.agent.store import AuditTrail

__all__ = [
    "DISCORD",
    "EMAIL",
    "SLACK",
    "TEAMS",
    "TELEGRAM",
    "Access",
    "Act",
    "AuditTrail",
    "Principal",
    "Ruling",
    "Scope",
    "ToolHints",
    "Verdict",
    "audit_refusal",
    "check_paths",
    "identity_key",
    "judge",
    "normalize_address",
    "same_identity",
]
