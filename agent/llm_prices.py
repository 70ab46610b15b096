"""What an OpenAI model's call costs, without importing litellm.

Budgets in USD need a price for every call. litellm ships a price map for every provider;
the direct OpenAI route reads that file as data (found with `importlib.util.find_spec`,
which locates the package without running it), once, and keeps only the OpenAI chat prices.
A model the map does not know has no price (None): tokens still count.
"""

from __future__ import annotations

import functools
import importlib.util
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: litellm's bundled copy of its price map (the one it reads offline).
PRICE_FILE = "model_prices_and_context_window_backup.json"


@dataclass(frozen=True)
class Price:
    """USD per token; cached prompt tokens at their own price where the model has one."""

    input: float
    output: float
    cache_read: float | None = None

    def of(self, *, tokens_in: int, tokens_out: int, cached: int = 0) -> float:
        cached = min(cached, tokens_in) if self.cache_read is not None else 0
        read = cached * (self.cache_read or 0.0)
        return (tokens_in - cached) * self.input + read + tokens_out * self.output


def price_file() -> Path | None:
    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / PRICE_FILE
    return path if path.is_file() else None


@functools.cache
def openai_prices() -> Mapping[str, Mapping[str, float]]:
    """The OpenAI models' price fields, by model name (read once; a few milliseconds)."""
    path = price_file()
    if path is None:
        return {}
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    fields = ("input_cost_per_token", "output_cost_per_token", "cache_read_input_token_cost")
    wanted = {*fields, *(f"{f}_{tier}" for f in fields for tier in ("priority", "flex"))}
    return {
        name: {k: float(v) for k, v in entry.items() if k in wanted and isinstance(v, int | float)}
        for name, entry in data.items()
        if isinstance(entry, dict) and entry.get("litellm_provider") == "openai"
    }


def known_price(model: str, *, service_tier: str | None = None) -> Price | None:
    """The listed price of an OpenAI model ("gpt-4o"; "openai/gpt-4o" works too) at a
    service tier ("priority", "flex") where the map has one; None when it is not listed."""
    prices = openai_prices()
    fields = prices.get(model) or prices.get(model.removeprefix("openai/"))
    if fields is None or "input_cost_per_token" not in fields:
        return None

    def tiered(name: str) -> float | None:
        value = fields.get(f"{name}_{service_tier}") if service_tier else None
        return value if value is not None else fields.get(name)

    return Price(
        input=tiered("input_cost_per_token") or 0.0,
        output=tiered("output_cost_per_token") or 0.0,
        cache_read=tiered("cache_read_input_token_cost"),
    )


def own_price(options: Mapping[str, Any]) -> Price | None:
    """A price the skill sets itself (`input_cost_per_token`, `output_cost_per_token`)."""
    if "input_cost_per_token" not in options and "output_cost_per_token" not in options:
        return None
    return Price(
        input=float(options.get("input_cost_per_token") or 0.0),
        output=float(options.get("output_cost_per_token") or 0.0),
    )
