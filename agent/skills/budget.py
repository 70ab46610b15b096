"""What a skill's runs may use: tokens, cost, steps and time per run, and per day."""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator

from pizzabot.agent.skills._base import Strict
from pizzabot.agent.skills.durations import Duration, parse_duration


class DailyBudget(Strict):
    """What all runs of one skill may use per day (UTC), together."""

    tokens: int | None = Field(default=None, ge=1)
    cost_usd: float | None = Field(default=None, gt=0)


class Budget(Strict):
    """Caps per run (and `per_day` per skill). Unset fields fall back to the server's defaults."""

    tokens: int | None = Field(default=None, ge=1)
    cost_usd: float | None = Field(default=None, gt=0)
    steps: int | None = Field(default=None, ge=1)
    wall_time: Duration | None = None
    per_day: DailyBudget = DailyBudget()

    @field_validator("wall_time", mode="before")
    @classmethod
    def _duration(cls, v: Any) -> Any:
        return None if v is None else parse_duration(v)

    def over(self, defaults: Budget) -> Budget:
        """This budget with `defaults` filling what it leaves unset."""
        own = self.model_dump(exclude_none=True, exclude={"per_day"})
        day = defaults.per_day.model_dump(exclude_none=True) | self.per_day.model_dump(
            exclude_none=True
        )
        merged = defaults.model_dump(exclude_none=True, exclude={"per_day"}) | own
        return Budget(**merged, per_day=DailyBudget(**day))
