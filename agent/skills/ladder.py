"""A tool's escalation ladder: what happens, step by step, while nobody decides its card.

    escalate:
      - {after: 30m, remind: true}           # send the card again to the same places
      - {after: 1h, to: group:sre-leads}     # send it further; those people may decide it now
      - {after: 2h, then: reject}            # give up honestly: reject (or halt the run)

A ladder never ends in an approval: its last word is `reject` or `halt`. The older
`remind_after`, `escalate_after` / `escalate_to` and `timeout` / `on_timeout` are steps of
the same ladder (`pizzabot.agent.escalation` reads both).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import field_validator, model_validator

from pizzabot.agent.skills._base import Strict
from pizzabot.agent.skills.durations import Duration, parse_duration

__all__ = ["Step", "check_ladder"]


class Step(Strict):
    """One step: after `after` without a decision, `remind`, widen `to` people and groups
    (`group:NAME`), or `then` end the card."""

    after: Duration
    remind: bool = False
    to: list[str] = []
    then: Literal["reject", "halt"] | None = None

    @field_validator("after", mode="before")
    @classmethod
    def _duration(cls, v: Any) -> Any:
        return parse_duration(v)

    @field_validator("to", mode="before")
    @classmethod
    def _one(cls, v: Any) -> Any:
        return [v] if isinstance(v, str) else v

    @model_validator(mode="after")
    def _one_thing(self) -> Step:
        said = [k for k in ("remind", "to", "then") if getattr(self, k)]
        if len(said) != 1:
            raise ValueError(
                "a step does one thing after its time: remind: true, to: (people or "
                "group:NAME), or then: reject | halt"
            )
        return self


def check_ladder(steps: list[Step], *, timeout: float | None) -> None:
    """A ladder's steps come in order of time, and only its last may end the card (and not
    beside `timeout`, which is such an end already)."""
    afters = [s.after for s in steps]
    if afters != sorted(afters):
        raise ValueError("escalate: list the steps in the order of their after")
    ends = [i for i, s in enumerate(steps) if s.then]
    if ends and ends != [len(steps) - 1]:
        raise ValueError("escalate: only the last step may end the card (then: reject | halt)")
    if ends and timeout is not None:
        raise ValueError("escalate: a step with then: and timeout: both end the card; keep one")
