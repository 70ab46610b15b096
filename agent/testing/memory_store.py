"""`MemoryStore`: the engine's `Store` kept in a process's memory, for tests.

It exists for two reasons. The store contract (`tests/contract/`) runs against it beside
SQLite and PostgreSQL, so the contract is seen to be what the role protocols of
`pizzabot.agent.store` promise, not what SQL happens to do. And a test of code that takes a
role (`RunReader`, `InboxItems`, `AuditTrail`, ...) can hand it one without a database.

It implements every role of `Store`: `RunStore` (with `RunReader`), `InboxItems` (with
`ItemReader` and `CardRefresh`), `Outbox` (with `DeliveryReader`), `AuditLog` (with
`AuditTrail`), `Switches`, `RequestStore` and `Undos`. It does not implement the stores kept beside
`Store`: `Grants`, `Approvals`, `ItemTimers`, `MailLog`, tokens, schedules (the contract
suite runs their tests on SQL only).

What the contract demands is kept: leases fence every owner's write (`LeaseLost`), the first
decision wins (`AlreadyDecided`) at the version its card showed (`CardChanged`), a key makes
one run or one request, a run's events are numbered in order with no gaps, the kill switch
stops claims. Each call is a transaction: nothing in it awaits, so on one event loop no other
call sees it half done, and one that raises is rolled back. It is not for more than one
process, nor for more than one thread.

    store = MemoryStore()
    await store.create_run(run_id="r1", skill="s", input="hi", trigger="test", now=now)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pizzabot.agent.testing._memory_inbox import MemoryInbox
from pizzabot.agent.testing._memory_outbox import MemoryAudit, MemoryOutbox, MemorySwitches
from pizzabot.agent.testing._memory_requests import MemoryRequests
from pizzabot.agent.testing._memory_runs import MemoryRuns
from pizzabot.agent.testing._memory_undos import MemoryUndos

if TYPE_CHECKING:
    from pizzabot.agent.store import Store

__all__ = ["MemoryStore"]


class MemoryStore(
    MemoryRuns,
    MemoryInbox,
    MemoryOutbox,
    MemoryAudit,
    MemorySwitches,
    MemoryRequests,
    MemoryUndos,
):
    async def aclose(self) -> None:
        """Nothing to close; the state goes with the object."""


if TYPE_CHECKING:
    # The type checker's proof that a memory store is a whole `Store`, role by role.
    _whole: Store = MemoryStore()
