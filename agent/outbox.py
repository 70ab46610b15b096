"""The outbox dispatcher: delivers inbox items to channels, with retries, and updates copies.

Deliveries are rows written with their item, so an item is never lost because Slack or SMTP
was down: the dispatcher keeps trying, and once a delivery is sent, a decision marks it for an
update so every copy shows the outcome.

A delivery's receiver is not always friendly (a request's callback URL is whatever the
requester chose), so no delivery can delay another:

- **Lanes.** Each channel has a lane of its own, with at most `Limits.concurrency` runs'
  deliveries under way at once: a callback that stalls never holds a Slack, mail or web card,
  and a few that stall only narrow their own lane. A run's deliveries on one channel go one at
  a time, oldest first, because Slack and mail thread a run's later cards under its first.
- **Sub-lanes by receiver.** A channel whose deliveries go to receivers of the requesters'
  choosing (callbacks: `target` names a URL's origin) splits its lane by receiver: at most
  `Limits.concurrency` runs' deliveries under way per receiver, and at most `Limits.targets`
  receivers at once, so a few slow or failing receivers hold only their own sub-lanes and
  another receiver's deliveries go on beside them. A due delivery whose receiver is full is
  parked (left out of the next looks, up to a few thousand) until one of that receiver's jobs
  ends, so however many it has due, the look still reaches the others'.
- **A deadline.** Every attempt (a channel's `deliver` or `update`, connection and answer
  together) ends after `Limits.attempt_timeout` seconds, however slowly its receiver drips.
- **Backoff.** A failed attempt is tried again after an exponential backoff with jitter
  (tenacity's wait strategies do the arithmetic), or later where the receiver asked for that
  with `Retry-After`, which is honoured up to `Limits.retry_after_max` only.
- **A dead letter.** After `Limits.max_attempts` failed attempts in a row, or a refusal that
  retrying cannot change, the delivery is given up: status `failed`, never tried again, an
  audit entry `delivery_dead` written in the same transaction, counted in `GET /api/status`.

A failure's text is kept as the delivery's last error and logged, and Slack's or an SMTP
server's answer can echo the token or password it was given: it goes through the server's
:class:`~agent.redaction.Redactor` first, then is cut to :data:`MAX_ERROR` characters (in
that order, so a cut cannot leave half a secret the redactor no longer recognises).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta

from tenacity import RetryCallState, Retrying, wait_exponential, wait_random_exponential

from pizzabot.agent.channel import Channel, DeliveryError
from pizzabot.agent.context import Context
from pizzabot.agent.model import Delivery, DeliveryStatus
from pizzabot.agent.redaction import Redactor
from pizzabot.agent.tasks import stop_if_cancelled

__all__ = ["MAX_ERROR", "Dispatcher", "Limits"]

log = logging.getLogger(__name__)

#: Characters of a failure's text kept as a delivery's last error.
MAX_ERROR = 500
#: Due deliveries a lane reads in one look; a run's later ones wait for its earlier ones.
_LOOK = 50
#: Due deliveries a lane keeps parked for receivers that are full; past it, they are looked
#: at again (and left again) rather than kept.
_PARK_MAX = 2000


@dataclass(frozen=True)
class Limits:
    """What one delivery may cost the outbox, and when it is given up."""

    #: Seconds one attempt may take in all (connecting, sending, the answer).
    attempt_timeout: float = 30.0
    #: Runs whose deliveries a channel's lane sends at once (per receiver, on a channel that
    #: tells its receivers apart).
    concurrency: int = 4
    #: Receivers (callback URL origins) a channel that tells them apart sends to at once.
    targets: int = 16
    #: Failed attempts in a row after which a delivery is a dead letter.
    max_attempts: int = 12
    #: The first retry's delay in seconds; it doubles per failed attempt ...
    backoff_base: float = 1.0
    #: ... up to this many seconds.
    backoff_max: float = 300.0
    #: The longest `Retry-After` honoured, in seconds; a longer one waits this long.
    retry_after_max: float = 600.0

    def gives_up(self, attempts: int) -> bool:
        """Whether a delivery that failed `attempts` times in a row is a dead letter."""
        return attempts >= self.max_attempts

    def delay(self, attempts: int, retry_after: float | None = None) -> float:
        """Seconds to wait after the `attempts`-th failed attempt in a row: a backoff of
        between half and all of ``min(backoff_max, backoff_base * 2 ** (attempts - 1))``, or
        the receiver's `retry_after` where that is longer, up to `retry_after_max`. Finite
        for every input, however large or malformed."""
        half_base, half_max = self.backoff_base / 2, self.backoff_max / 2
        # Half fixed, half random: retries spread out, yet each waits at least half its step.
        wait = wait_exponential(multiplier=half_base, max=half_max) + wait_random_exponential(
            multiplier=half_base, max=half_max
        )
        backoff = wait(_attempt(max(1, attempts)))
        # `not >=` also catches NaN; inf is capped like any other long wait.
        asked = 0.0 if retry_after is None or not retry_after >= 0 else retry_after
        return max(backoff, min(asked, self.retry_after_max))


def _attempt(number: int) -> RetryCallState:
    """A tenacity call state at attempt `number`: all its wait strategies read."""
    state = RetryCallState(Retrying(), None, (), {})
    state.attempt_number = number
    return state


@dataclass
class _Lane:
    """One channel's deliveries under way: a job per run (per run and receiver, where the
    channel names receivers), each sending its due deliveries in order, at most `size` jobs
    at once; with `per_target`, at most that many per receiver and `targets` receivers."""

    size: int
    per_target: int | None = None
    targets: int = 1
    jobs: dict[str, asyncio.Task[None]] = field(default_factory=dict)
    #: The ids of the deliveries the jobs hold, so a look does not take them twice.
    held: set[str] = field(default_factory=set)
    #: Jobs under way per receiver, and the receiver of each job.
    active: dict[str, int] = field(default_factory=dict)
    target_of: dict[str, str] = field(default_factory=dict)
    #: Due deliveries whose receiver was full, by receiver: left out of the looks meanwhile.
    parked: dict[str, set[str]] = field(default_factory=dict)
    slots: asyncio.Semaphore = field(init=False)

    def __post_init__(self) -> None:
        self.slots = asyncio.Semaphore(self.size)

    def free(self) -> int:
        return max(0, self.size - len(self.jobs))

    def skipped(self) -> set[str]:
        return self.held.union(*self.parked.values())

    def admits(self, target: str) -> bool:
        """Whether a job for `target` may start: its receiver has room, and either has jobs
        already or another receiver may begin."""
        if self.per_target is None:
            return True
        if target in self.active:
            return self.active[target] < self.per_target
        return len(self.active) < self.targets

    def park(self, target: str, ids: Sequence[str]) -> None:
        if sum(map(len, self.parked.values())) + len(ids) <= _PARK_MAX:
            self.parked.setdefault(target, set()).update(ids)

    def began(self, job: str, target: str) -> None:
        self.target_of[job] = target
        self.active[target] = self.active.get(target, 0) + 1

    def ended(self, job: str) -> None:
        """A job is over: its receiver has room again, and so, where it has no job left, has
        the lane for another receiver; what was parked for them is looked at again."""
        target = self.target_of.pop(job, None)
        if target is None:
            return
        self.active[target] -= 1
        if not self.active[target]:
            del self.active[target]
        for waiting in [t for t in self.parked if t == target or t not in self.active]:
            del self.parked[waiting]


class Dispatcher:
    """Sends and updates the deliveries that are due, each channel in its lane (see above):
    `run_forever` in the one process that delivers, `drain` for one pass in tests."""

    def __init__(
        self,
        ctx: Context,
        channels: dict[str, Channel],
        *,
        limits: Limits = Limits(),
        poll_interval: float = 2.0,
        redactor: Redactor | None = None,
        wake: asyncio.Event | None = None,
    ) -> None:
        self.ctx = ctx
        self.channels = channels
        self.limits = limits
        self.poll_interval = poll_interval
        self.redact = redactor or Redactor()
        #: What it sleeps on between passes; given when `ctx.wake_outbox` rings it.
        self._wake = wake or asyncio.Event()
        self._lanes: dict[str, _Lane] = {}

    def wake(self) -> None:
        self._wake.set()

    async def run_forever(self) -> None:
        try:
            while True:
                stop_if_cancelled()
                # Cleared before the pass, not after: a wake-up during it must not be lost.
                self._wake.clear()
                try:
                    await self._fill()
                except Exception:
                    log.exception("outbox pass failed")
                # `asyncio.timeout`, not `wait_for`: on Python 3.11 `wait_for` swallows a
                # cancel that arrives as the event is set, and the dispatcher would never stop.
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self.poll_interval):
                        await self._wake.wait()
        finally:
            await self._stop_jobs()

    async def drain(self) -> int:
        """Do every delivery and update due now once (runs side by side, within the lanes'
        limits: what a full receiver's sub-lane parks waits for the next pass) and wait for
        them; return how many were handled."""
        busy = await self.ctx.store.channels_with_work()
        handled = await self._bury_unrouted(busy)
        jobs: list[asyncio.Task[None]] = []
        for name, lane in self._each_lane(busy):
            for task, group in self._start(lane, await self._due(name, lane), room=_LOOK):
                jobs.append(task)
                handled += len(group)
        await asyncio.gather(*jobs)
        return handled

    # -- the lanes -------------------------------------------------------------------------

    async def _fill(self) -> None:
        """Start a job for each run with deliveries due, as far as each lane has room."""
        # One look says which channels have work at all: a wake-up (each card, each
        # decision) then reads those lanes alone, not every channel the server has.
        busy = await self.ctx.store.channels_with_work()
        await self._bury_unrouted(busy)
        for name, lane in self._each_lane(busy):
            if room := lane.free():
                self._start(lane, await self._due(name, lane), room=room)

    def _each_lane(self, busy: set[str]) -> list[tuple[str, _Lane]]:
        """The lanes of the channels in `busy` (made on first use: `channels` is the
        caller's dict)."""
        return [(name, self._lane(name)) for name in self.channels if name in busy]

    def _lane(self, name: str) -> _Lane:
        if name not in self._lanes:
            size = max(1, self.limits.concurrency)
            if _target_of(self.channels[name]) is None:
                self._lanes[name] = _Lane(size)
            else:
                targets = max(1, self.limits.targets)
                self._lanes[name] = _Lane(size * targets, per_target=size, targets=targets)
        return self._lanes[name]

    async def _due(self, name: str, lane: _Lane) -> list[Delivery]:
        return await self.ctx.store.due_deliveries(
            now=self.ctx.clock(), limit=_LOOK, channels=(name,), skip=lane.skipped()
        )

    def _start(
        self, lane: _Lane, due: Sequence[Delivery], *, room: int
    ) -> list[tuple[asyncio.Task[None], list[Delivery]]]:
        """Jobs for up to `room` runs of `due` that have none under way yet (per receiver,
        where the channel names them), as far as each receiver has room."""
        started: list[tuple[asyncio.Task[None], list[Delivery]]] = []
        target_of = _target_of(self.channels[due[0].channel]) if due else None
        for (run_id, target), group in _by_run(due, target_of).items():
            job = f"{run_id} {target}" if target_of is not None else run_id
            if len(started) >= room:
                break
            if job in lane.jobs:
                continue  # its job is still busy; what is due now waits for the next look
            if not lane.admits(target):
                lane.park(target, [d.id for d in group])
                continue
            task = asyncio.create_task(self._job(lane, group), name=f"outbox:{run_id}")
            lane.jobs[job] = task
            lane.held.update(d.id for d in group)
            if target_of is not None:
                lane.began(job, target)
            task.add_done_callback(functools.partial(self._done, lane, job, group))
            started.append((task, group))
        return started

    def _done(self, lane: _Lane, job: str, group: list[Delivery], _: asyncio.Task[None]) -> None:
        lane.jobs.pop(job, None)
        lane.held.difference_update(d.id for d in group)
        lane.ended(job)
        self._wake.set()  # its slot is free: look again

    async def _job(self, lane: _Lane, group: list[Delivery]) -> None:
        async with lane.slots:
            for delivery in group:
                try:
                    await self._one(delivery)
                except Exception as exc:
                    # Not the channel's failure but reading or recording around it: count it
                    # as a failed attempt all the same, so the delivery waits its backoff
                    # instead of coming straight back (if even that cannot be recorded, the
                    # database is away and the next look finds nothing either).
                    log.exception("outbox: delivery %s could not be handled", delivery.id)
                    with contextlib.suppress(Exception):
                        await self._failed(delivery, exc)

    async def _stop_jobs(self) -> None:
        jobs = [task for lane in self._lanes.values() for task in lane.jobs.values()]
        for task in jobs:
            task.cancel()
        # An attempt cut short is not a failure: the delivery stays due for the next start.
        await asyncio.gather(*jobs, return_exceptions=True)

    async def _bury_unrouted(self, busy: set[str]) -> int:
        """Give up the due deliveries of the channels in `busy` this server does not have."""
        unrouted = busy.difference(self.channels)
        if not unrouted:
            return 0
        store = self.ctx.store
        due = await store.due_deliveries(now=self.ctx.clock(), channels=unrouted)
        for delivery in due:
            await store.delivery_failed(
                delivery.id,
                error=f"channel {delivery.channel!r} is not configured",
                retry_at=None,
                now=self.ctx.clock(),
            )
        return len(due)

    # -- one delivery ----------------------------------------------------------------------

    async def _one(self, delivery: Delivery) -> None:
        store = self.ctx.store
        channel = self.channels[delivery.channel]
        item = await store.get_item(delivery.item_id)
        deadline = asyncio.timeout(self.limits.attempt_timeout)
        try:
            async with deadline:
                if delivery.status is DeliveryStatus.PENDING:
                    ref = await channel.deliver(item, delivery)
                else:
                    await channel.update(item, delivery)
        except Exception as exc:
            if isinstance(exc, TimeoutError) and deadline.expired():
                exc = DeliveryError(f"no answer within {self.limits.attempt_timeout:g}s")
            await self._failed(delivery, exc)
            return
        if delivery.status is DeliveryStatus.PENDING:
            await store.delivery_sent(delivery.id, ref=ref, now=self.ctx.clock())
        else:
            await store.delivery_updated(delivery.id, now=self.ctx.clock())

    async def _failed(self, delivery: Delivery, exc: Exception) -> None:
        now = self.ctx.clock()
        attempts = delivery.attempts + 1
        retry_after = exc.retry_after if isinstance(exc, DeliveryError) else None
        permanent = isinstance(exc, DeliveryError) and exc.permanent
        if permanent or self.limits.gives_up(attempts):
            retry_at = None
        else:
            retry_at = now + timedelta(seconds=self.limits.delay(attempts, retry_after))
        error = self.redact(str(exc))[:MAX_ERROR]
        log.warning(
            "delivery %s on %s failed (attempt %d%s): %s",
            delivery.id,
            delivery.channel,
            attempts,
            ", given up" if retry_at is None else "",
            error,
            extra={"run_id": delivery.run_id, "item_id": delivery.item_id},
        )
        await self.ctx.store.delivery_failed(delivery.id, error=error, retry_at=retry_at, now=now)


def _target_of(channel: Channel) -> Callable[[Delivery], str] | None:
    """The channel's `target` (which receiver a delivery goes to), where it tells them apart."""
    target = getattr(channel, "target", None)
    return target if callable(target) else None


def _by_run(
    due: Sequence[Delivery], target_of: Callable[[Delivery], str] | None = None
) -> dict[tuple[str, str], list[Delivery]]:
    """`due` grouped by run (and receiver, with `target_of`), each group and the groups in the
    order given (oldest first)."""
    groups: dict[tuple[str, str], list[Delivery]] = {}
    for delivery in due:
        target = target_of(delivery) if target_of is not None else ""
        groups.setdefault((delivery.run_id, target), []).append(delivery)
    return groups
