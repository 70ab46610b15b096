"""Handing a run to this process's worker in the transaction that makes it runnable.

A worker that has room takes a run the moment it is created or decided: the creating or
deciding transaction claims it under the worker's lease and hands it over with its log, so it
starts without a wake-up, a pass and a claim of its own. The composition root installs the
worker on the store (`HandOverHook`); nothing between them, the inbox and the runs included,
carries it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from pizzabot.agent.events import Event
from pizzabot.agent.model import Run

__all__ = ["ClaimedRun", "HandOverHook", "Handover", "HandsOver", "Take"]


@dataclass(frozen=True)
class ClaimedRun:
    """A run just claimed, with its event log as of the claim (read in the same transaction,
    so the worker starts stepping without another round trip)."""

    run: Run
    events: list[Event]


@dataclass
class Take:
    """A hand-over in flight: the lease a run is claimed with by the transaction that makes it
    runnable (a decision's, or a new run's), and, when it was, the run with its log. Only a
    store with a `Handover` installed makes one (`HandsOver`)."""

    lease: str
    lease_seconds: float
    claimed: ClaimedRun | None = None


class Handover(Protocol):
    """This process's worker, as the store sees it once the composition root installed it
    (`HandsOver.hand_over_to`; `pizzabot.agent.worker.Worker`): offered every run the store
    makes runnable, claimed in the transaction that makes it so, then started at once; or,
    when it was not claimed, woken to look."""

    def offer(self) -> Take | None:
        """A lease to claim a run with, when the worker has room (None: queue it)."""
        ...

    def start(self, take: Take) -> None:
        """Step the run `take` claimed (its transaction has committed)."""
        ...

    def wake(self) -> None:
        """A run was queued rather than taken: look for it."""
        ...


class HandOverHook(Protocol):
    """The roles that make runs runnable (`RunStore`, `InboxItems`) take this process's
    worker from the composition root."""

    def hand_over_to(self, handover: Handover | None) -> None:
        """Offer every run this store makes runnable to `handover` (None: to nobody)."""
        ...


class HandsOver:
    """`HandOverHook` for a store: the hand-over hook of a store's run-making writes (`create_run`, `record_decision`):
    none until the composition root installs this process's worker, and then one per store
    object, so the engine's callers never see it."""

    _handover: Handover | None = None

    def hand_over_to(self, handover: Handover | None) -> None:
        """Offer every run this store makes runnable to `handover` (None: to nobody)."""
        self._handover = handover

    def _offer(self) -> Take | None:
        return self._handover.offer() if self._handover is not None else None

    def _handed_over(self, take: Take | None) -> None:
        """After the commit: start what `take` claimed, or wake the worker to look."""
        if self._handover is None:
            return
        if take is not None and take.claimed is not None:
            self._handover.start(take)
        else:
            self._handover.wake()
