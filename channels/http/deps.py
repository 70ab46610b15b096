"""What every API route gets from the running server: the engine's parts and the policy,
as one typed object the composition root makes (`ApiDeps`), found per request with
`Depends` (`Deps`). The routes exist before the server has started; the object is set on the
app's state when it has.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any, Protocol

from fastapi import Depends, HTTPException, Request

from pizzabot.agent.devices import Subscriptions
from pizzabot.agent.inbox import Inbox
from pizzabot.agent.mcp_oauth import McpAuth
from pizzabot.agent.policy import Access
from pizzabot.agent.policy.grants import Grants
from pizzabot.agent.policy.tokens import TokenDesk
from pizzabot.agent.requests import Requests
from pizzabot.agent.runs import Runs
from pizzabot.agent.skills import Reload, SkillBook
from pizzabot.agent.stats import CardHistory
from pizzabot.agent.store import Store

if TYPE_CHECKING:
    from pizzabot.channels.triggers.scheduler import Scheduler

__all__ = ["ApiDeps", "Deps", "SkillFolder", "api_deps"]


class SkillFolder(Protocol):
    """The skills folder, as the API shows and reloads it."""

    @property
    def interval(self) -> float:
        """Seconds between looks for changed files (0: not watched)."""
        ...

    async def reload(self, *, actor: str, channel: str) -> Reload: ...


@dataclass(frozen=True)
class ApiDeps:
    store: Store
    runs: Runs
    inbox: Inbox
    requests: Requests
    #: Who may do what: the one policy every channel asks.
    access: Access
    tokens: TokenDesk
    skills: SkillBook
    skill_folder: SkillFolder
    clock: Callable[[], datetime]
    #: The secret a skill's callbacks are signed with (None: it has none on this server).
    callback_secret: Callable[[str], str | None]
    #: What this process does (its worker, the singletons it leads, the outbox): /api/status.
    status: Callable[[], Awaitable[dict[str, Any]]]
    #: None where the server keeps no grants.
    grants: Grants | None = None
    #: None in a process that runs no scheduler.
    scheduler: Scheduler | None = None
    #: The browsers that get Web Push (`pizzabot.channels.http.push_api`); None: none are kept.
    push: Subscriptions | None = None
    #: The cards the fatigue figures are measured on (`/api/stats`); None: not kept.
    history: CardHistory | None = None
    #: OAuth for skills' MCP servers (`pizzabot.agent.mcp_oauth`); None: not kept here.
    mcp_auth: McpAuth | None = None


async def api_deps(request: Request) -> ApiDeps:
    deps = getattr(request.app.state, "api", None)
    if not isinstance(deps, ApiDeps):
        raise HTTPException(503, "the server is still starting")
    return deps


Deps = Annotated[ApiDeps, Depends(api_deps)]
