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


#: The channels where people act under their own identity, as a skill file names them.
IDENTITY_CHANNELS = ("slack", "email", "teams", "discord", "telegram")


def _id_text(value: Any) -> Any:
    """Discord and Telegram ids are numbers, and YAML reads an unquoted one as an int: it is
    kept as its decimal text (a float or a bool is left for the type check to refuse)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if isinstance(value, list):
        return [_id_text(v) for v in value]
    return value


class Person(Strict):
    """One human and their identity on each channel, so that a count of approvals counts
    people, not accounts (alice on Slack and alice by email approve once)."""

    slack: str | None = None  # a Slack user id
    email: str | None = None
    teams: str | None = None  # a Microsoft Entra object id (Teams' from.aadObjectId)
    discord: str | None = None  # a Discord user id (a snowflake)
    telegram: str | None = None  # a Telegram user id

    @field_validator("discord", "telegram", mode="before")
    @classmethod
    def _number_id(cls, v: Any) -> Any:
        return _id_text(v)

    @field_validator(*IDENTITY_CHANNELS)
    @classmethod
    def _identity(cls, v: str | None) -> str | None:
        return v.strip() or None if v is not None else None

    @field_validator("email")
    @classmethod
    def _lower(cls, v: str | None) -> str | None:
        return v.lower() if v is not None else None

    def on(self, channel: str) -> str | None:
        """This person's identity on `channel` (one of `IDENTITY_CHANNELS`); None: not there."""
        value = getattr(self, channel, None) if channel in IDENTITY_CHANNELS else None
        return value if isinstance(value, str) else None


class Approvers(Strict):
    slack: list[str] = []
    email: list[str] = []
    teams: list[str] = []
    discord: list[str] = []
    telegram: list[str] = []
    #: Names of people (`Skill.people`), with every identity each has.
    people: list[str] = []

    @field_validator("email")
    @classmethod
    def _lower(cls, v: list[str]) -> list[str]:
        return [a.strip().lower() for a in v]

    @field_validator("discord", "telegram", mode="before")
    @classmethod
    def _number_ids(cls, v: Any) -> Any:
        return _id_text(v)


PeopleOrApprovers = Annotated[Approvers, BeforeValidator(_people_list)]


class Deliver(Strict):
    slack: str | None = None  # channel id, or a user id for a DM
    email: list[str] = []
    teams: str | None = None  # a conversation id (a channel's 19:…@thread.tacv2, a chat's)
    discord: str | None = None  # a channel id
    telegram: str | None = None  # a chat id (a person's own id for their private chat)

    @field_validator("discord", "telegram", mode="before")
    @classmethod
    def _number_id(cls, v: Any) -> Any:
        return _id_text(v)


class Escalation(Deliver):
    """Where a tool's unanswered item goes after `escalate_after`, and who may then decide.

    The approvers are added to the skill's approvers for that tool's items (from the start:
    deciding stays a stateless check), so the people it escalates to can act on it.
    """

    approvers: PeopleOrApprovers = Approvers()
