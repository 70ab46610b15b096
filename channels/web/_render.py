"""Jinja2 templates of the web inbox: one autoescaping environment and a few filters.

Autoescape is on for every template, so a tool's arguments, a model's message or a skill's
name can never inject markup into the page.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from jinja2 import Environment, FileSystemLoader, StrictUndefined

from pizzabot.agent.model import PREVIEW_LABEL, Usage
from pizzabot.agent.timeline import money, pretty

if TYPE_CHECKING:
    from collections.abc import Sequence

    from pizzabot.channels.web.forms import FieldView

TEMPLATES = Path(__file__).resolve().parent / "templates"
STATIC = Path(__file__).resolve().parent / "static"


def _when(value: datetime | None) -> str:
    if value is None:
        return "—"
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _iso(value: datetime | None) -> str:
    return "" if value is None else value.isoformat()


def _short(value: str | None) -> str:
    return (value or "")[:8]


class CostView(NamedTuple):
    """A run's cost as the page shows it, with a short note saying how far to trust it."""

    text: str
    note: str


def _cost(usage: Usage, running: bool = False) -> CostView:
    """What is known of a run's cost: nothing yet, the priced sum (so far, while it runs), or
    that the model has no price (litellm's price list does not know it: local or custom)."""
    if usage.steps == 0:
        return CostView("—", "no model call yet")
    if not usage.cost_known:
        if usage.cost_usd <= 0:
            return CostView("not priced", "the model has no known price")
        return CostView(f"at least {money(usage.cost_usd)}", "some model calls are not priced")
    return CostView(money(usage.cost_usd), "so far" if running else "")


def _count(value: int | None) -> str:
    return "—" if value is None else f"{value:,}"


class DetailView(NamedTuple):
    """An audit entry's detail: short values in one line, long ones (arguments before and
    after an edit) folded away so that an entry stays a few lines high."""

    short: str
    long: list[tuple[str, str]]


_DETAIL_INLINE = 60  # characters of a value shown in the line; a longer one is folded


def _detail(detail: Mapping[str, Any] | None) -> DetailView:
    short: list[str] = []
    long: list[tuple[str, str]] = []
    for key, value in (detail or {}).items():
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        if len(text) > _DETAIL_INLINE:
            long.append((str(key), pretty(value)))
        else:
            short.append(f"{key}={text}")
    return DetailView(", ".join(short), long)


def _environment() -> Environment:
    env = Environment(
        loader=FileSystemLoader(TEMPLATES),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.globals["preview_label"] = PREVIEW_LABEL  # pizzabot.agent.preview's words, on every card
    env.filters.update(
        when=_when, iso=_iso, short=_short, cost=_cost, detail=_detail, count=_count, pretty=pretty
    )
    return env


_ENV = _environment()


def render(name: str, **context: Any) -> str:
    return _ENV.get_template(name).render(**context)


_FIELDS = _ENV.from_string(
    '{% from "_fields.html" import field %}{% for v in views %}{{ field(v) }}{% endfor %}'
)


def render_fields(views: Sequence[FieldView]) -> str:
    """The inputs of an edit form alone, as the item page draws them."""
    return _FIELDS.render(views=views)
