"""What an OpenAI model's call costs, without importing litellm.

Budgets in USD need a price for every call. litellm ships a price map for every provider;
the direct OpenAI route reads that file as data (found with `importlib.util.find_spec`,
which locates the package without running it), once per model, parsing only that model's
entry. A model the map does not know has no price (None): tokens still count.
"""

from __future__ import annotations

import importlib.util
import json
import re
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


#: The price fields read: per token, cached prompt tokens, and per service tier.
_FIELDS = ("input_cost_per_token", "output_cost_per_token", "cache_read_input_token_cost")
_WANTED = frozenset({*_FIELDS, *(f"{f}_{t}" for f in _FIELDS for t in ("priority", "flex"))})


def listed(name: str) -> dict[str, float] | None:
    """The OpenAI model `name`'s price fields in the map, or None. Only that entry is parsed
    (~15 ms to scan the ~3 MB file): parsing the whole map would leave ~5 MiB behind."""
    path = price_file()
    if path is None:
        return None
    text = path.read_text(encoding="utf-8")
    decoder = json.JSONDecoder()
    for match in re.finditer(rf'"{re.escape(name)}"\s*:\s*\{{', text):
        try:
            entry, _ = decoder.raw_decode(text, match.end() - 1)
        except ValueError:
            continue
        if isinstance(entry, dict) and entry.get("litellm_provider") == "openai":
            return {
                k: float(v)
                for k, v in entry.items()
                if k in _WANTED and isinstance(v, int | float) and not isinstance(v, bool)
            }
    return None


def known_price(model: str, *, service_tier: str | None = None) -> Price | None:
    """The listed price of an OpenAI model ("gpt-4o"; "openai/gpt-4o" works too) at a
    service tier ("priority", "flex") where the map has one; None when it is not listed.
    Reads the file: callers keep the answer."""
    name = model.removeprefix("openai/")
    fields = listed(name) or listed(f"openai/{name}")
    if fields is None or "input_cost_per_token" not in fields:
        return None

    def tiered(field: str) -> float | None:
        value = fields.get(f"{field}_{service_tier}") if service_tier else None
        return value if value is not None else fields.get(field)

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
