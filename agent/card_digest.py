"""A card's digest: what its approver saw, so that a decision counts only for that.

Every card of an action item (a Slack message and its edit form, the App Home, a mail and
its links and reply address, the web form, the API's item) carries the digest of the item as
that card shows it: the arguments, the item's version (bumped by every edit) and the policy
that asked (the rule, how many people must approve, whether a passkey must confirm it), and
the preview of what the call would do, where the card shows one. A
decision sends it back (`seen`); `pizzabot.agent.inbox.Inbox.decide` refuses one whose digest
is not the item's now (`CardChanged`), and the store takes a decision only for the version it
was made on, so an edit that lands between the two cannot slip under an approval either. A
passkey's step-up assertion is bound to the same digest (`pizzabot.agent.step_up`).

The digest is a keyed-free SHA-256 of canonical JSON, cut to 128 bits: it names a state, it
proves nothing on its own (every way in is authenticated already).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from pizzabot.agent.model import Item

__all__ = ["DIGEST_CHARS", "card_digest", "seen_matches"]

#: Hex characters of a digest (128 bits): short enough for a Slack button's value.
DIGEST_CHARS = 32


def card_digest(item: Item) -> str:
    """The digest of `item` as a card shows it now."""
    shown: dict[str, Any] = {
        "item": item.id,
        "version": item.version,
        "kind": str(item.kind),
        "tool": item.tool,
        "args": item.args,
        "rule": item.risk.rule,
        "required": item.risk.approvals_required or 1,
        "requested_by": item.requested_by,
    }
    if item.risk.step_up is not None:
        # Only where it applies, so the digests of cards without a step-up stay as they were.
        shown["step_up"] = item.risk.step_up
    if item.risk.preview is not None:
        # What the call would do, as the card shows it: an approval counts for that preview.
        shown["preview"] = item.risk.preview.as_dict()
    canonical = json.dumps(shown, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:DIGEST_CHARS]


def seen_matches(item: Item, seen: str | None) -> bool:
    """Whether a decision that says it saw `seen` was made on `item` as it is now (None:
    the way in carries no digest, and the store's version check alone binds it)."""
    return seen is None or seen.strip().lower() == card_digest(item)
