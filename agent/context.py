"""What every part of the engine is handed: the store, the skills, the clock and the ids.

Injecting the clock and the id maker is what lets time-outs, leases and retries be tested
without waiting.
"""

from __future__ import annotations

import secrets
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from pizzabot.agent.bell import Bell
from pizzabot.agent.policy.access import Access
from pizzabot.agent.policy.grants import Grants
from pizzabot.agent.policy.quorum import Approvals
from pizzabot.agent.preview import Previewer
from pizzabot.agent.skills import SkillBook
from pizzabot.agent.step_up import Confirmer
from pizzabot.agent.store import Store


def utcnow() -> datetime:
    return datetime.now(UTC)


def new_id() -> str:
    return uuid.uuid4().hex[:16]


def _noop() -> None:
    return None


@dataclass
class Context:
    store: Store
    skills: SkillBook
    clock: Callable[[], datetime] = utcnow
    ids: Callable[[], str] = new_id
    secrets: Callable[[], str] = field(default=lambda: secrets.token_urlsafe(16))
    #: Wake a worker: a run became runnable (started, decided, followed up).
    wake_workers: Callable[[], None] = _noop
    #: Wake the outbox dispatcher: deliveries or updates are due.
    wake_outbox: Callable[[], None] = _noop
    #: Wake the clock's loop (`pizzabot.agent.timers`): an item with a time-out was made, so
    #: it expires when it says, not at the loop's next pass.
    wake_timers: Callable[[], None] = _noop
    #: Channels that are configured: deliveries are only made for these.
    channels: frozenset[str] = frozenset()
    #: Base URL of the web page, for links in messages ("" when unknown).
    base_url: str = ""
    #: Called with a run's id after it ended (trace export); failures are logged, not raised.
    on_run_end: Callable[[str], Awaitable[None]] | None = None
    #: Where grants ("don't ask again for …") are kept; None: this server offers none.
    grants: Grants | None = None
    #: Where counts of approvals are kept (tools that need more than one person); None:
    #: such calls cannot be approved here.
    approvals: Approvals | None = None
    #: Rung on every decision, here or (PostgreSQL) in another process: what waiters for a
    #: person's answer sleep on (a request's long-poll, an elicitation in a running tool).
    decisions: Bell = field(default_factory=Bell)
    #: Who may do what (`pizzabot.agent.policy.access`); by default from the skills alone (nobody
    #: starts runs by email).
    access: Access = field(default=None)  # type: ignore[assignment]
    #: Checks the passkey assertion a step-up approval carries (`pizzabot.agent.step_up`);
    #: None: this server checks none, so a call that needs one cannot be approved here.
    step_up: Confirmer | None = None
    #: Makes a call's preview anew when an edit keeps its card open (`pizzabot.agent.preview`);
    #: None: this process calls no tools, and such an edit's card says it has no preview.
    previews: Previewer | None = None

    def __post_init__(self) -> None:
        if self.access is None:
            self.access = Access(skills=self.skills)
