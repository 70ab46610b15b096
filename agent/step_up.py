"""Step-up: an approval of a risky call counts only with a fresh passkey assertion for its card.

A skill, a tool's entry or one of its rules says `step_up: passkey`
(`pizzabot.agent.skills.step_up`); `step_up_for` reads which calls that covers, and the card records it (`Risk.step_up`, part of
the card's digest). `Inbox.decide` then refuses an approval or an edit of such an item unless
it carries an `Assertion`: a WebAuthn assertion whose challenge was derived from the card's
digest and a server nonce (`challenge_for`), made by a passkey of the same principal that
decides. The check is in the engine, so no channel can forget it: a Slack button, a mail link
or the API alone is refused with a pointer to the page, where the person confirms with their
passkey. Reject never needs one. What the card recorded and what the skill says now are both
honoured (a reload that adds a step-up applies at once; one that removes it does not lift it
from a card that showed it).

A grant ("don't ask again") would let later calls skip the passkey, so a call that needs a
step-up is offered none and covered by none (`pizzabot.agent.policy.grants`).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Protocol

from pizzabot.agent.model import Item, ItemKind, Risk
from pizzabot.agent.policy.principal import Principal
from pizzabot.agent.policy.rules import Ruling, judge
from pizzabot.agent.skills import Skill, StepUp, StepUpFor, ToolRule

__all__ = [
    "Assertion",
    "Confirmer",
    "challenge_for",
    "item_step_up",
    "risk_words",
    "step_up_for",
]


def risk_words(risk: Risk) -> set[str]:
    """The risk words a card's notes say (`irreversible`, `external`, `high`)."""
    words: set[str] = set()
    if risk.reversible is False:
        words.add("irreversible")
    if (risk.scope or "").strip().lower() == "external":
        words.add("external")
    if (risk.impact or "").strip().lower() == "high":
        words.add("high")
    return words


def step_up_for(skill: Skill, tool: str, ruling: Ruling | None, risk: Risk) -> StepUp | None:
    """What an approval of a call of `tool` needs, as `ruling` asked about it and `risk`
    describes it: "passkey", or None."""
    if ruling is not None and ruling.source == "rule" and ruling.entry and ruling.number:
        entry = skill.tools.get(ruling.entry)
        if isinstance(entry, ToolRule) and 0 < ruling.number <= len(entry.rules):
            said = entry.rules[ruling.number - 1].step_up
            if said is not None:
                return said
    own = skill.rule(tool).step_up
    if own is not None:
        return own
    wide = skill.step_up
    if isinstance(wide, StepUpFor):
        return "passkey" if risk_words(risk) & set(wide.passkey) else None
    return wide


def item_step_up(item: Item, skill: Skill | None) -> str | None:
    """What approving `item` needs now: what its card recorded, else what the loaded skill
    says of its call (a tool call only: a question or a budget has no step-up)."""
    if item.kind is not ItemKind.TOOL:
        return None
    if item.risk.step_up is not None:
        return item.risk.step_up
    if skill is None or item.tool is None:
        return None
    ruling = judge(skill, item.tool, item.args or {})
    return step_up_for(skill, item.tool, ruling, item.risk)


def challenge_for(*, item_id: str, digest: str, nonce: str) -> bytes:
    """The WebAuthn challenge of a step-up: the card (its item and digest) and a one-time
    server nonce, hashed, so an assertion confirms exactly one card once."""
    text = f"pizzabot step-up\0{item_id}\0{digest}\0{nonce}"
    return hashlib.sha256(text.encode()).digest()


@dataclass(frozen=True)
class Assertion:
    """A passkey's answer to a step-up challenge, as the browser gave it: the nonce the
    server handed out, and the `PublicKeyCredential` as JSON."""

    nonce: str
    credential: str


class Confirmer(Protocol):
    """Checks a step-up assertion (`pizzabot.agent.passkeys.Passkeys`)."""

    async def confirm(self, item: Item, *, digest: str, by: Principal, assertion: Assertion) -> str:
        """The name of `by`'s passkey that confirmed the card whose digest is `digest`;
        `PasskeyRefused` (audited) when the assertion is not one."""
        ...
