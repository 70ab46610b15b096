"""What a skill file says about step-up: which approvals need a fresh passkey assertion.

    step_up: passkey                               # every approval of this skill's calls
    step_up: {passkey: [irreversible, external]}   # calls whose risk notes say one of these
    tools:
      bank.pay: {policy: ask, step_up: passkey}    # every approval of this tool
      bank.refund:
        rules:
          - when: {amount: {gt: 1000}}
            policy: ask
            step_up: passkey                       # only when this rule asked

The risk words read a tool's notes: `irreversible` is `reversible: false`, `external` is
`scope: external`, `high` is `impact: high`. `pizzabot.agent.step_up` applies them.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from pizzabot.agent.skills._base import Strict

#: The one kind of step-up there is: a passkey (WebAuthn) assertion.
StepUp = Literal["passkey"]
#: Risk notes that can call for a step-up.
RiskWord = Literal["irreversible", "external", "high"]


class StepUpFor(Strict):
    """Step-up for the calls whose risk notes say one of `passkey`'s words."""

    passkey: list[RiskWord] = Field(min_length=1)
