"""Policy: what the engine allows, decided in one place so that no channel decides it.

`access` answers "may this identity decide / start / follow up, via this channel" and writes
refusals to the audit trail. Channels translate their protocol's identity (a Slack user id,
a mail's one `From` address) and ask; the web page, the API and the CLI act as the owner.
"""

from agent.policy.access import (
    OWNER_CHANNELS,
    Access,
    Act,
    Verdict,
    audit_refusal,
)
from agent.policy.identity import EMAIL, SLACK, identity_key, normalize_address, same_identity
from agent.store import AuditTrail

__all__ = [
    "EMAIL",
    "OWNER_CHANNELS",
    "SLACK",
    "Access",
    "Act",
    "AuditTrail",
    "Verdict",
    "audit_refusal",
    "identity_key",
    "normalize_address",
    "same_identity",
]
