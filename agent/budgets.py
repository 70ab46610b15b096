"""Which budget a run has reached, if any: one table of limits, checked in order.

A skill's budget caps tokens, cost, model calls (steps) and wall time per run, and tokens and
cost per day for all runs of the skill. Reaching one does not fail the run: the engine asks a
person to extend it (by the same amount once more) or to stop. What "extend" decisions added
is kept on the run (`Run.budget_extra`, by the keys below), so a cap is its base plus that.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from pizzabot.agent.model import Run, Usage
from pizzabot.agent.skills import Budget

__all__ = ["BudgetCheck", "check_budget", "day_start"]


@dataclass(frozen=True)
class BudgetCheck:
    reached: str | None  # a sentence saying which budget, or None
    extend: dict[str, float] = field(default_factory=dict)  # what "extend" adds: the base again


@dataclass(frozen=True)
class _Measure:
    """What the run (or its skill, today) has used so far."""

    usage: Usage
    elapsed: float | None  # seconds since the run started, when known
    day: Usage | None  # all runs of the skill today, when a daily budget is set


@dataclass(frozen=True)
class _Limit:
    key: str  # the key in `Run.budget_extra` and in an extension
    base: Callable[[Budget], float | None]
    used: Callable[[_Measure], float | None]
    says: Callable[[str, float, float], str]  # (skill, used, cap) -> the sentence


def _money(value: float) -> str:
    return f"${value:.4f}"


_LIMITS: tuple[_Limit, ...] = (
    _Limit(
        "tokens",
        lambda b: b.tokens,
        lambda m: m.usage.tokens,
        lambda _s, used, cap: f"token budget reached: {used:.0f} of {cap:g} tokens",
    ),
    _Limit(
        "steps",
        lambda b: b.steps,
        lambda m: m.usage.steps,
        lambda _s, used, cap: f"step budget reached: {used:.0f} of {cap:g} model calls",
    ),
    _Limit(
        "cost_usd",
        lambda b: b.cost_usd,
        lambda m: m.usage.cost_usd,
        lambda _s, used, cap: f"cost budget reached: {_money(used)} of {_money(cap)}",
    ),
    _Limit(
        "wall_time",
        lambda b: b.wall_time,
        lambda m: m.elapsed,
        lambda _s, used, cap: f"wall-time budget reached: {used:.0f}s of {cap:.0f}s",
    ),
    _Limit(
        "day_tokens",
        lambda b: b.per_day.tokens,
        lambda m: m.day.tokens if m.day else None,
        lambda s, used, cap: (
            f"daily token budget of skill {s} reached: {used:.0f} of {cap:g} tokens today"
        ),
    ),
    _Limit(
        "day_cost_usd",
        lambda b: b.per_day.cost_usd,
        lambda m: m.day.cost_usd if m.day else None,
        lambda s, used, cap: (
            f"daily cost budget of skill {s} reached: {_money(used)} of {_money(cap)} today"
        ),
    ),
)


def day_start(now: datetime) -> datetime:
    return now.replace(hour=0, minute=0, second=0, microsecond=0)


def check_budget(
    budget: Budget,
    run: Run,
    usage: Usage,
    now: datetime,
    started: datetime | None,
    day: Usage | None = None,
) -> BudgetCheck:
    """Which budget the run has reached, if any. `run.budget_extra` holds what "extend"
    decisions added; `day` is what all runs of the skill used today."""
    elapsed = (now - started).total_seconds() if started is not None else None
    measure = _Measure(usage, elapsed, day)
    for limit in _LIMITS:
        base, used = limit.base(budget), limit.used(measure)
        if base is None or used is None:
            continue
        cap = base + run.budget_extra.get(limit.key, 0)
        if used >= cap:
            return BudgetCheck(limit.says(run.skill, used, cap), {limit.key: base})
    return BudgetCheck(None)
