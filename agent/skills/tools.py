"""A skill's entry for one tool (or pattern of tools): its policy and rules, its risk, its
time-outs and escalation, the grants it offers and how many people must approve."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from pizzabot.agent.model import Risk
from pizzabot.agent.skills._base import Strict
from pizzabot.agent.skills.durations import Duration, parse_duration
from pizzabot.agent.skills.ladder import Step, check_ladder
from pizzabot.agent.skills.people import Escalation
from pizzabot.agent.skills.rules import Policy, Rule
from pizzabot.agent.skills.step_up import StepUp
from pizzabot.agent.skills.undo import UndoCall

#: The grants a tool offers when its entry does not say (`grants:`).
DEFAULT_GRANTS = ("run", "1h", "exact")


class Approvals(Strict):
    """How many different people must approve a tool's call before it runs (`required`).

    A person is counted once whatever channel they use (see `Skill.people`), so a skill that
    asks for two cannot list an approver by a bare identity where that human may also
    approve through another channel (the skill is refused). One reject ends the item, and an
    edit restarts the count (see `pizzabot.agent.policy.quorum`)."""

    required: int = Field(default=1, ge=1, le=20)
    #: Who may approve this tool's calls, in place of the skill's approvers: people and
    #: groups (`of: group:finance`, "two of finance").
    of: list[str] = []

    @field_validator("of", mode="before")
    @classmethod
    def _one(cls, v: Any) -> Any:
        return [v] if isinstance(v, str) else v


class ToolRule(Strict):
    policy: Policy = "ask"
    #: Checked in order on the call's arguments; the first that holds decides, else `policy`.
    rules: list[Rule] = []
    impact: Literal["low", "medium", "high"] | None = None
    reversible: bool | None = None
    scope: str | None = None
    idempotent: bool = False
    timeout: Duration | None = None
    on_timeout: Literal["reject", "halt"] = "reject"
    remind_after: Duration | None = None
    escalate_after: Duration | None = None
    escalate_to: Escalation | None = None
    #: The escalation ladder: remind, widen, then reject or halt (`pizzabot.agent.skills.ladder`).
    escalate: list[Step] = []
    #: What an approver may choose next to Approve so that this tool is not asked about
    #: again: `run` (the rest of this run), a duration (`1h`: this skill, for that long),
    #: `exact` (these arguments, this skill, until revoked); `[]` offers none.
    grants: list[str] = list(DEFAULT_GRANTS)
    #: More than one person for this tool: `{required: 2}` (no grant is offered then).
    approvals: Approvals = Approvals()
    #: False: whoever asked for a call of this tool may not approve it (None: the skill's).
    self_approval: bool | None = None
    #: `passkey`: every approval of this tool needs a fresh passkey assertion
    #: (`pizzabot.agent.skills.step_up`).
    step_up: StepUp | None = None
    #: A dry-run tool ("server.tool") called with the same arguments when the card is made;
    #: its text is shown on the card as a preview (`pizzabot.agent.preview`).
    preview: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_-]+\.[A-Za-z0-9_./-]+$")
    #: How long the preview may take before the card says it timed out.
    preview_timeout: Duration = 10.0
    #: A `notify` tool's compensating call, offered as Undo on its FYI
    #: (`pizzabot.agent.skills.undo`).
    undo: UndoCall | None = None

    @field_validator("timeout", "remind_after", "escalate_after", mode="before")
    @classmethod
    def _duration(cls, v: Any) -> Any:
        return None if v is None else parse_duration(v)

    @field_validator("preview_timeout", mode="before")
    @classmethod
    def _preview_timeout(cls, v: Any) -> Any:
        seconds = parse_duration(v)
        if not 0 < seconds <= 120:
            raise ValueError("preview_timeout: between 1s and 2m")
        return seconds

    @field_validator("grants")
    @classmethod
    def _grants(cls, v: list[str]) -> list[str]:
        for choice in v:
            if choice in ("run", "exact"):
                continue
            try:
                seconds = parse_duration(choice)
            except ValueError:
                seconds = 0.0
            if not seconds > 0:
                raise ValueError(f"grant {choice!r}: use run, exact or a duration like 1h or 8h")
        if len(set(v)) != len(v):
            raise ValueError("a grant is listed twice")
        return v

    @model_validator(mode="after")
    def _escalation(self) -> ToolRule:
        if self.escalate_after is not None and self.escalate_to is None:
            raise ValueError("escalate_after needs escalate_to (where the item goes, who decides)")
        check_ladder(self.escalate, timeout=self.timeout)
        return self

    def asked_by(self, number: int | None) -> ToolRule:
        """This entry as it stands for a card that its rule `number` (from 1) asked about:
        that rule's own ladder in place of the tool's, when it has one; else this entry."""
        if number is None or not 0 < number <= len(self.rules):
            return self
        rule = self.rules[number - 1]
        if not rule.has_ladder:
            return self
        update = {
            "escalate": rule.escalate,
            "timeout": rule.timeout,
            "on_timeout": rule.on_timeout or "reject",
            "remind_after": rule.remind_after,
            "escalate_after": None,
        }
        return self.model_copy(update=update)

    @property
    def risk(self) -> Risk:
        return Risk(impact=self.impact, reversible=self.reversible, scope=self.scope)
