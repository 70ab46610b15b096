"""Who decides a skill's items and where they go: people with their identity on each
channel, approver lists, delivery targets and the escalation of an unanswered item."""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import BeforeValidator, field_validator

from pizzabot.agent.skills._base import Strict

_PERSON = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


def _people_list(value: Any) -> Any:
    """`approvers: [alice, bob]` names people (`Skill.people`); the mapping form lists
    identities per channel, and may name people too (`people: [alice]`)."""
    return {"people": value} if isinstance(value, list) else value


class Person(Strict):
    """One human and their identity on each channel, so that a count of approvals counts
    people, not accounts (alice on Slack and alice by email approve once)."""

    slack: str | None = None  # a Slack user id
    email: str | None = None

    @field_validator("slack", "email")
    @classmethod
    def _identity(cls, v: str | None) -> str | None:
        return v.strip() or None if v is not None else None

    @field_validator("email")
    @classmethod
    def _lower(cls, v: str | None) -> str | None:
        return v.lower() if v is not None else None

    def on(self, channel: str) -> str | None:
        """This person's identity on `channel` ("slack", "email"); None: not there."""
        value = getattr(self, channel, None) if channel in ("slack", "email") else None
        return value if isinstance(value, str) else None


class Approvers(Strict):
    slack: list[str] = []
    email: list[str] = []
    #: Names of people (`Skill.people`), with every identity each has.
    people: list[str] = []

    @field_validator("email")
    @classmethod
    def _lower(cls, v: list[str]) -> list[str]:
        return [a.strip().lower() for a in v]


PeopleOrApprovers = Annotated[Approvers, BeforeValidator(_people_list)]


class Deliver(Strict):
    slack: str | None = None  # channel id, or a user id for a DM
    email: list[str] = []


class Escalation(Deliver):
    """Where a tool's unanswered item goes after `escalate_after`, and who may then decide.

    The approvers are added to the skill's approvers for that tool's items (from the start:
    deciding stays a stateless check), so the people it escalates to can act on it.
    """

    approvers: PeopleOrApprovers = Approvers()
