"""Policy: what the engine allows, decided in one place so that no channel decides it.

`access` answers "may this identity decide / start / follow up, via this channel" and writes
refusals to the audit trail. Channels translate their protocol's identity (a Slack user id,
a mail's one `From` address) and ask; the web page, the API and the CLI act as the owner.

`rules` answers "auto, ask or deny, and why" for one tool call: the skill's rules on its
argument values, the tool's policy, and (where the skill opts in) the tool's own hints.
"""

from agent.policy.access import (
    OWNER_CHANNELS,
    Access,
    Act,
    Verdict,
    audit_refusal,
)
from agent.policy.identity import EMAIL, SLACK, identity_key, normalize_address, same_identity
from agent.policy.rules import Ruling, ToolHints, check_paths, judge
from agent.store import AuditTrail

__all__ = [
    "EMAIL",
    "OWNER_CHANNELS",
    "SLACK",
    "Access",
    "Act",
    "AuditTrail",
    "Ruling",
    "ToolHints",
    "Verdict",
    "audit_refusal",
    "check_paths",
    "identity_key",
    "judge",
    "normalize_address",
    "same_identity",
]
