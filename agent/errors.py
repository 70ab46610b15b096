"""The one exception tree of the engine, so callers can tell configuration from run failures.

    PizzaBotError
    ├── UserError              you configured something wrong (a skill file, a setting)
    │   └── SkillError         a skill file is invalid: carries file, line and what is wrong
    ├── NotFound               no such run, item or skill
    ├── Conflict               the state does not allow it
    │   ├── AlreadyDecided     the first decision won; carries the item with who/when/how
    │   ├── AlreadyApproved    this person's approval is counted already (two-person approval)
    │   ├── CardChanged        the card a decision was made on is not the item as it is now
    │   ├── AlreadyUndone      an FYI's Undo runs once; carries the item with who undid it
    │   └── KillSwitchOn       the global kill switch refuses new work and holds decisions
    ├── NotAllowed             the principal may not do this (not an approver, out of scope)
    │   ├── OwnRequest         the person who asked may not approve it (self-approval rules)
    │   ├── StepUpRequired     this approval needs a fresh passkey assertion bound to the card
    │   └── PasskeyRefused     a passkey ceremony failed (signature, counter, challenge)
    ├── InvalidArguments       edited arguments fail the tool's JSON schema (errors by field)
    │   └── InboxOnly          a run of an inbox-only skill (also a NotFound: no such runnable skill)
    └── RunError               the run failed (provider gave up, tool server would not start)
        └── ModelError         the model provider failed after retries

A tool's own failure is not an exception here: it goes back to the model as a tool result.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pizzabot.agent.model import Item


class PizzaBotError(Exception):
    """Root of every error the engine raises on purpose."""


class UserError(PizzaBotError):
    """Something the user configured is wrong."""


class SkillError(UserError):
    def __init__(self, path: str, line: int | None, message: str) -> None:
        self.path = path
        self.line = line
        self.message = message
        where = f"{path}:{line}" if line else path
        super().__init__(f"{where}: {message}")


class NotFound(PizzaBotError):
    pass


class Conflict(PizzaBotError):
    pass


class AlreadyDecided(Conflict):
    def __init__(self, item: Item) -> None:
        self.item = item
        when = item.decided_at.isoformat() if item.decided_at else "earlier"
        super().__init__(
            f"already {item.status} by {item.decided_by} via {item.decided_via} at {when}"
        )


class AlreadyApproved(Conflict):
    """A person approved an item that needs more than one, and had approved it already: a
    person counts once, whichever channel they use."""

    def __init__(self, person: str, count: str) -> None:
        self.person = person
        self.count = count
        super().__init__(
            f"{person} approved this already and counts once ({count}): "
            "another person must approve it"
        )


class CardChanged(Conflict):
    """A decision carried the digest of a card that no longer shows the item: it was edited
    (or its policy changed) after that card was made. `item` is the item as it is now."""

    def __init__(self, item: Item) -> None:
        self.item = item
        super().__init__(
            "this card changed after you saw it: look at the new card "
            f"(version {item.version}) and decide again"
        )


class AlreadyUndone(Conflict):
    """An FYI's Undo was clicked already (`pizzabot.agent.undo`): it runs at most once."""

    def __init__(self, item: Item) -> None:
        self.item = item
        undo = item.undo
        by = f" by {undo.by} via {undo.via}" if undo is not None and undo.by else ""
        when = f" at {undo.at.isoformat()}" if undo is not None and undo.at else ""
        super().__init__(f"this was already undone{by}{when}")


class KillSwitchOn(Conflict):
    def __init__(self, reason: str | None = None) -> None:
        self.reason = reason
        said = f" ({reason})" if reason else ""
        super().__init__(
            f"the kill switch is on{said}: no new runs start and no decision is taken "
            "until it is lifted"
        )


class NotAllowed(PizzaBotError):
    pass


class OwnRequest(NotAllowed):
    """The person who asked for a call tried to approve it where that does not count: a rule
    that needs more than one person, or `self_approval: false`."""


class StepUpRequired(NotAllowed):
    """An approval of a call that needs a passkey (`step_up: passkey`) came without a valid
    assertion bound to the card's digest: a channel's button alone decides nothing. `url` is
    where the person confirms it with their passkey ("" when the page's address is unknown)."""

    def __init__(self, why: str, *, url: str = "") -> None:
        self.why = why
        self.url = url
        where = f" at {url}" if url else " on the web page"
        super().__init__(f"{why}: open the card{where} and approve it with your passkey")


class PasskeyRefused(NotAllowed):
    """A passkey's answer was not accepted: an unknown or someone else's credential, a bad
    signature, a challenge that was used, expired or made for something else, or a
    signature counter that did not move forward (a cloned authenticator)."""


class InvalidArguments(PizzaBotError):
    def __init__(self, errors: dict[str, str]) -> None:
        self.errors = errors
        detail = "; ".join(f"{k or '(arguments)'}: {v}" for k, v in errors.items())
        super().__init__(f"invalid arguments: {detail}")


class RunError(PizzaBotError):
    pass


class ModelError(RunError):
    pass


class InboxOnly(InvalidArguments, NotFound):
    """A run of an inbox-only skill was asked for: it answers requests, and runs nothing.
    The API answers 422 naming `skill`; a channel that starts runs says it as for a skill it
    does not know."""

    def __init__(self, message: str) -> None:
        super().__init__({"skill": message})
        Exception.__init__(self, message)
