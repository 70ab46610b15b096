"""What the contract tests share: a run claimed alone through the protocol's batch claim."""

from __future__ import annotations

from datetime import datetime

from pizzabot.agent.model import Run
from pizzabot.agent.store import RunStore


async def claim_one(
    runs: RunStore, *, lease: str, now: datetime, lease_seconds: float = 30
) -> Run | None:
    """The oldest claimable run, taken under `lease`; None when there is none."""
    claimed = await runs.claim_runs(lease=lease, now=now, lease_seconds=lease_seconds, limit=1)
    return claimed[0].run if claimed else None
