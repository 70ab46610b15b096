"""Jinja2 templates of the web inbox: one autoescaping environment and a few filters.

Autoescape is on for every template, so a tool's arguments, a model's message or a skill's
name can never inject markup into the page.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined

from channels.web.timeline import pretty

if TYPE_CHECKING:
    from collections.abc import Sequence

    from channels.web.forms import FieldView

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


def _money(value: float | None) -> str:
    return "—" if value is None else f"${value:.4f}"


def _count(value: int | None) -> str:
    return "—" if value is None else f"{value:,}"


def _environment() -> Environment:
    env = Environment(
        loader=FileSystemLoader(TEMPLATES),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(
        when=_when, iso=_iso, short=_short, money=_money, count=_count, pretty=pretty
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
