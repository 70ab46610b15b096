"""A tool's rules in a skill file: conditions on a call's arguments (`Check`, one per
argument path) and the policy that applies when they hold (`Rule`)."""

from __future__ import annotations

import difflib
import math
import re
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, field_validator, model_validator

from pizzabot.agent.shell import parse_command
from pizzabot.agent.skills._base import Strict
from pizzabot.agent.skills.durations import Duration, parse_duration
from pizzabot.agent.skills.ladder import Step, check_ladder

#: `notify` runs the call at once, like `auto`, and tells the approvers what ran
#: (`pizzabot.agent.notify`).
Policy = Literal["auto", "notify", "ask", "deny"]

#: The operators of a rule's condition (`Check`), in the order the docs list them.
OPERATORS = ("eq", "ne", "lt", "lte", "gt", "gte", "in", "not_in", "matches", "runs", "present")

_PATH = re.compile(r"^[^.\s]+(\.[^.\s]+)*$")


def _is_number(value: Any) -> bool:
    """A JSON number: Python's bool is an int, and is not one."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def _json_operand(value: Any, where: str) -> Any:
    """A value an argument can be compared with: what JSON holds (YAML also makes dates)."""
    if value is None or isinstance(value, str | bool) or _is_number(value):
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"{where}: {value} is not a number an argument can have")
        return value
    if isinstance(value, list):
        return [_json_operand(v, where) for v in value]
    if isinstance(value, dict):
        return {str(k): _json_operand(v, where) for k, v in value.items()}
    raise ValueError(
        f"{where}: {value} is a {type(value).__name__} in YAML, which no argument can be; "
        "quote it to compare with a string"
    )


def _bare_eq(value: Any) -> Any:
    """A bare value means `eq`; a mapping is operators, and only operators."""
    if not isinstance(value, dict):
        return {"eq": value}
    unknown = [str(k) for k in value if k not in OPERATORS]
    if unknown:
        close = difflib.get_close_matches(unknown[0], OPERATORS, n=1)
        hint = f": did you mean `{close[0]}`?" if close else ""
        raise ValueError(
            f"unknown operator `{unknown[0]}`{hint} (operators: {', '.join(OPERATORS)}; "
            "a nested argument is named by its dotted path, like customer.country)"
        )
    if not value:
        raise ValueError(f"no operator: use one of {', '.join(OPERATORS)}")
    return value


class Check(Strict):
    """What one argument must be for a rule to match; every operator given must hold.

    A value holds, does not hold, or maybe holds (a JSON type the operands do not have, text
    equal but for case or Unicode form, a command line that cannot be read): a maybe makes a
    `deny` or `ask` rule apply and an `auto` rule not (`pizzabot.agent.policy.rules` has the table).
    `runs` reads a shell command line (`pizzabot.agent.shell`)."""

    eq: Any = None
    ne: Any = None
    lt: float | None = None
    lte: float | None = None
    gt: float | None = None
    gte: float | None = None
    in_: list[Any] | None = Field(default=None, alias="in")
    not_in: list[Any] | None = None
    matches: str | None = None
    #: A command a shell command line must not run (`rm -r /`): for `deny` and `ask` rules.
    runs: str | None = None
    present: bool | None = Field(default=None, strict=True)

    @field_validator("lt", "lte", "gt", "gte", mode="before")
    @classmethod
    def _number(cls, v: Any, info: Any) -> Any:
        if not _is_number(v) or (isinstance(v, float) and not math.isfinite(v)):
            raise ValueError(f"{info.field_name} compares numbers, and {v!r} is not one")
        return v

    @field_validator("eq", "ne", mode="before")
    @classmethod
    def _value(cls, v: Any, info: Any) -> Any:
        return _json_operand(v, info.field_name)

    @field_validator("in_", "not_in", mode="before")
    @classmethod
    def _values(cls, v: Any, info: Any) -> Any:
        name = "in" if info.field_name == "in_" else info.field_name
        if not isinstance(v, list):
            raise ValueError(f"{name} takes a list of values, like [EUR, USD]")
        return _json_operand(v, name)

    @field_validator("matches", mode="before")
    @classmethod
    def _pattern(cls, v: Any) -> Any:
        if not isinstance(v, str):
            raise ValueError(f"matches takes a regular expression (a string), not {v!r}")
        try:
            re.compile(v)
        except re.error as exc:
            raise ValueError(f"matches: {v!r} is not a regular expression: {exc}") from None
        return v

    @field_validator("runs", mode="before")
    @classmethod
    def _command(cls, v: Any) -> Any:
        if not isinstance(v, str):
            raise ValueError(f"runs takes a command, like 'rm -r /', not {v!r}")
        try:
            parse_command(v)
        except ValueError as exc:
            raise ValueError(f"runs: {exc}") from None
        return v

    def operators(self) -> dict[str, Any]:
        """The operators this test sets, with their operands (an operand may be None)."""
        return {
            ("in" if name == "in_" else name): getattr(self, name)
            for name in type(self).model_fields
            if name in self.model_fields_set
        }


Condition = Annotated[Check, BeforeValidator(_bare_eq)]


class Rule(Strict):
    """A condition on a call's argument values and the policy that applies when it holds.

    An `ask` rule may carry its own escalation ladder (`escalate:`, `timeout` /
    `on_timeout`, `remind_after`): when this rule is the one that asks, its ladder takes the
    place of the tool's whole ladder (`ToolRule.asked_by`)."""

    when: dict[str, Condition]
    policy: Policy
    #: Shown on the card; for `deny`, what the model reads.
    reason: str | None = None
    #: `passkey`: an approval, when this rule asked, needs a fresh passkey assertion.
    step_up: Literal["passkey"] | None = None
    #: This rule's own ladder: remind, widen, then reject or halt (`pizzabot.agent.skills.ladder`).
    escalate: list[Step] = []
    timeout: Duration | None = None
    on_timeout: Literal["reject", "halt"] | None = None
    remind_after: Duration | None = None

    @field_validator("timeout", "remind_after", mode="before")
    @classmethod
    def _duration(cls, v: Any) -> Any:
        return None if v is None else parse_duration(v)

    @property
    def has_ladder(self) -> bool:
        """Whether this rule says what happens while nobody decides its card."""
        return bool(self.escalate) or self.timeout is not None or self.remind_after is not None

    @model_validator(mode="after")
    def _ladder_asks(self) -> Rule:
        if self.has_ladder and self.policy != "ask":
            raise ValueError(
                "escalate, timeout and remind_after say what happens to a card nobody "
                "decides: give them to a rule whose policy is ask"
            )
        if self.on_timeout is not None and self.timeout is None:
            raise ValueError("on_timeout needs timeout (how long the card waits)")
        check_ladder(self.escalate, timeout=self.timeout)
        return self

    @model_validator(mode="after")
    def _step_up_asks(self) -> Rule:
        if self.step_up is not None and self.policy != "ask":
            raise ValueError(
                "step_up applies to an approval: give it to a rule whose policy is ask"
            )
        return self

    @model_validator(mode="after")
    def _auto_runs_nothing(self) -> Rule:
        if self.policy in ("auto", "notify"):
            for path, check in self.when.items():
                if check.runs is not None:
                    raise ValueError(
                        f"{path}: runs finds a command in what a shell would run, and cannot "
                        "prove a command line harmless: use it in deny and ask rules (an auto "
                        "or notify rule can name a whole command with matches)"
                    )
        return self

    @field_validator("when", mode="before")
    @classmethod
    def _paths(cls, v: Any) -> Any:
        if isinstance(v, dict):
            if not v:
                raise ValueError("`when` needs a condition; the tool's policy applies otherwise")
            for path in v:
                if not isinstance(path, str) or not _PATH.match(path):
                    raise ValueError(
                        f"{path!r} is not an argument's name or dotted path (customer.country)"
                    )
        return v
