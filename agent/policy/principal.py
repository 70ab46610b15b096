"""Who is asking: every caller of the engine is a principal, and its scope caps what it may do.

A principal is one of four kinds:

- the **owner**: whoever holds the server's API token (the web page signed in with it, the
  API and the CLI with it). Scope `admin`; counted as the person `owner`.
- a named **token** (`pizzabot.agent.policy.tokens`), made by an admin for one agent or one device.
  Its scope is `ask` (file requests, read and wait on its own, the MCP tools: nothing else),
  `decide` (also decide, as the person the token names, what that person may decide) or
  `admin` (everything the owner may do).
- a **person** on a channel where people act under their own identity: a Slack user id, a
  mail's one `From` address. What they may do is what the skills' lists say
  (`pizzabot.agent.policy.access`); their scope is `decide` at most.
- a **person signed in on the web page by a mail link** (`by_mail`): the address a sign-in
  link was mailed to. They count by that address, as the skills' `email` lists and `people:`
  name it (`namespace`), and act through the page.
- a **system** trigger: a schedule, a signed webhook, the clock. It may start the runs it
  was configured to start, and decide nothing.

`actor` is how a principal is recorded (an item's `decided_by`, the audit's `actor`), and
`requester` the key its requests are kept under (idempotency keys are per requester, and an
`ask` token reads only its own requests).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Literal

__all__ = ["Kind", "Principal", "Scope"]

Kind = Literal["owner", "token", "person", "system"]


class Scope(enum.StrEnum):
    """What a principal may do at most, from the least to the most."""

    ASK = "ask"
    DECIDE = "decide"
    ADMIN = "admin"

    def covers(self, needed: Scope) -> bool:
        """Whether this scope allows what `needed` allows."""
        order = (Scope.ASK, Scope.DECIDE, Scope.ADMIN)
        return order.index(self) >= order.index(needed)

    def allows(self) -> str:
        """What this scope allows, in words (a refusal says it)."""
        return _ALLOWS[self]


_ALLOWS = {
    Scope.ASK: "file requests, read and wait on its own requests, and use the MCP tools",
    Scope.DECIDE: (
        "file and read requests, read the inbox and runs, and decide, start and follow up "
        "what the person it names may"
    ),
    Scope.ADMIN: "everything",
}


@dataclass(frozen=True)
class Principal:
    """One caller: its `kind`, the way it came in (`channel`: api, mcp, web, slack, email,
    schedule, ...), its `identity` there (a token's name, a Slack user id, an address), its
    `scope`, and for a token the person it names (`person`) and its id (`token_id`)."""

    kind: Kind
    channel: str
    identity: str
    scope: Scope
    person: str | None = None
    token_id: str | None = None
    #: (delegate, away person): deciding as an away person's delegate
    #: (`pizzabot.agent.policy.away`); recorded as "bob for alice".
    on_behalf: tuple[str, str] | None = None

    @classmethod
    def owner(cls, channel: str) -> Principal:
        """The holder of the server's API token, through `channel` (api, web, cli)."""
        return cls("owner", channel, "owner", Scope.ADMIN, person="owner")

    @classmethod
    def of(cls, channel: str, identity: str) -> Principal:
        """A person acting under their own identity on `channel` (slack, email)."""
        return cls("person", channel, identity, Scope.DECIDE)

    @classmethod
    def by_mail(cls, address: str) -> Principal:
        """A person signed in on the web page by a link mailed to `address`: they act through
        the page and count by that address (`namespace`)."""
        return cls("person", "web", address, Scope.DECIDE)

    @classmethod
    def system(cls, channel: str, name: str | None = None) -> Principal:
        """A trigger that acts on its own (a schedule, a webhook, the clock, the bench)."""
        return cls("system", channel, name or channel, Scope.ASK)

    @classmethod
    def token(
        cls, *, token_id: str, name: str, scope: Scope, person: str | None, channel: str = "api"
    ) -> Principal:
        """A named token's holder, through `channel` (api, mcp, web)."""
        return cls("token", channel, name, scope, person=person, token_id=token_id)

    def via(self, channel: str) -> Principal:
        """The same principal, come in through another channel (the web page, `/mcp`)."""
        return Principal(
            self.kind,
            channel,
            self.identity,
            self.scope,
            self.person,
            self.token_id,
            self.on_behalf,
        )

    @property
    def is_admin(self) -> bool:
        return self.kind != "system" and self.scope is Scope.ADMIN

    @property
    def namespace(self) -> str:
        """The channel whose lists name this principal's identity: its own channel, except
        for a person signed in on the page by a mail link, who is their email address."""
        if self.kind == "person" and self.channel == "web":
            return "email"
        return self.channel

    @property
    def actor(self) -> str:
        """How the principal is recorded: `owner`, the person a token names, `token:NAME`
        for a token that names nobody, the identity of a person or a trigger; a delegate as
        "bob for alice"."""
        if self.on_behalf is not None:
            return f"{self.on_behalf[0]} for {self.on_behalf[1]}"
        match self.kind:
            case "owner":
                return "owner"
            case "token":
                return self.person or f"token:{self.identity}"
            case _:
                return self.identity

    @property
    def requester(self) -> str:
        """The key a principal's requests are kept under: `owner`, `token:ID`, or the
        channel and identity of a person or a trigger."""
        match self.kind:
            case "owner":
                return "owner"
            case "token":
                return f"token:{self.token_id}"
            case _:
                return f"{self.channel}:{self.identity}"

    def describe(self) -> str:
        """The principal in words, for an audit entry or a card: "token deploy-bot (ask)"."""
        match self.kind:
            case "owner":
                return "the owner"
            case "token":
                named = f", as {self.person}" if self.person else ""
                return f"token {self.identity} ({self.scope}{named})"
            case "person":
                return f"{self.identity} on {self.channel}"
            case _:
                return f"{self.identity} ({self.channel})"
