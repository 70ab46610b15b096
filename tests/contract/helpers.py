"""What the contract tests share: a run claimed alone through the protocol's batch claim, and
a worker as the store sees it once installed (`Hand`)."""

from __future__ import annotations

from datetime import datetime

from pizzabot.agent.handover import ClaimedRun, Take
from pizzabot.agent.model import Run
from pizzabot.agent.store import RunStore


async def claim_one(
    runs: RunStore, *, lease: str, now: datetime, lease_seconds: float = 30
) -> Run | None:
    """The oldest claimable run, taken under `lease`; None when there is none."""
    claimed = await runs.claim_runs(lease=lease, now=now, lease_seconds=lease_seconds, limit=1)
    return claimed[0].run if claimed else None


class Hand:
    """A worker as a store sees it once installed: it offers a lease per run made runnable,
    and keeps what it was given to start, and how often it was woken instead."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.offered = 0
        self.started: list[ClaimedRun] = []
        self.woken = 0

    def offer(self) -> Take | None:
        self.offered += 1
        return Take(lease=f"{self.name}#{self.offered}", lease_seconds=30)

    def start(self, take: Take) -> None:
        assert take.claimed is not None
        self.started.append(take.claimed)

    def wake(self) -> None:
        self.woken += 1
