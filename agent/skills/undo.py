"""A `notify` tool's Undo in a skill file: the compensating call its FYI offers.

    crm.add_contact:
      policy: notify
      undo: crm.delete_contact                  # called with the same arguments
    crm.add_contact:
      policy: notify
      undo: {tool: crm.delete_contact, args: {id: "{result.id}", email: "{args.email}"}}

A string value of `args` may hold templates: `{args.NAME}` is an argument of the call that
ran, `{result.NAME}` a field of what it answered (its text read as JSON); a dotted path
reaches inside (`{result.contact.id}`). A value that is one template alone keeps the type of
what it names (a number stays a number); inside a longer text it is written as text. The
templates are checked when the skill loads and filled when the FYI is made
(`pizzabot.agent.undo`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from pydantic import Field, field_validator, model_validator

from pizzabot.agent.skills._base import Strict

__all__ = ["UndoCall", "fill"]

_TEMPLATE = re.compile(r"\{([^{}]*)\}")
_PLACE = re.compile(r"^(args|result)((?:\.[A-Za-z0-9_-]+)+)$")


class UndoCall(Strict):
    """The compensating tool ("server.tool") and its arguments (None: the call's own)."""

    tool: str = Field(pattern=r"^[A-Za-z0-9_-]+\.[A-Za-z0-9_./-]+$")
    args: dict[str, Any] | None = None

    @model_validator(mode="before")
    @classmethod
    def _short(cls, v: Any) -> Any:
        return {"tool": v} if isinstance(v, str) else v

    @field_validator("args")
    @classmethod
    def _templates(cls, v: dict[str, Any] | None) -> dict[str, Any] | None:
        for text in _strings(v or {}):
            for found in _TEMPLATE.finditer(text):
                if not _PLACE.match(found.group(1)):
                    raise ValueError(
                        f"{found.group(0)} is not a template: use {{args.NAME}} (an argument "
                        "of the call that ran) or {result.NAME} (a field of its answer)"
                    )
        return v


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, Mapping):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def fill(undo: UndoCall, args: Mapping[str, Any], result: str) -> dict[str, Any]:
    """The compensating call's arguments for a call that ran with `args` and answered
    `result`. Raises ValueError saying what is missing (a field the answer lacks)."""
    if undo.args is None:
        return dict(args)
    sources: dict[str, Any] = {"args": dict(args), "result": _parsed(result)}
    filled = _fill(undo.args, sources)
    assert isinstance(filled, dict)
    return filled


def _parsed(result: str) -> Any:
    try:
        return json.loads(result)
    except ValueError:
        return None


def _fill(value: Any, sources: Mapping[str, Any]) -> Any:
    if isinstance(value, Mapping):
        return {k: _fill(v, sources) for k, v in value.items()}
    if isinstance(value, list):
        return [_fill(v, sources) for v in value]
    if not isinstance(value, str):
        return value
    whole = _TEMPLATE.fullmatch(value)
    if whole is not None:
        return _look_up(whole.group(1), sources)
    return _TEMPLATE.sub(lambda m: _as_text(_look_up(m.group(1), sources)), value)


def _look_up(place: str, sources: Mapping[str, Any]) -> Any:
    source, *path = place.split(".")
    found = sources[source]
    if source == "result" and found is None:
        raise ValueError(f"{{{place}}}: the tool's answer is not JSON")
    for key in path:
        if isinstance(found, list) and key.isdigit() and int(key) < len(found):
            found = found[int(key)]
        elif isinstance(found, Mapping) and key in found:
            found = found[key]
        else:
            raise ValueError(f"{{{place}}}: the {_NAMES[source]} has no {key!r}")
    return found


_NAMES = {"args": "call's arguments", "result": "tool's answer"}


def _as_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
