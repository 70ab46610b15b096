"""A run's events as a timeline a person can read without developer tools.

The event log is the trace; this turns each event into a title, a few short facts (tokens,
latency, who decided via which channel) and blocks of longer text (arguments as indented
JSON, a tool's result, the model's message). Unknown kinds still show, with their raw data,
so a newer engine never makes events vanish from the page.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from agent.model import Event, EventKind

__all__ = ["Block", "Entry", "entries", "money", "pretty", "tool_name"]


@dataclass(frozen=True)
class Block:
    """A longer piece of an event: JSON (``code``) or words a person or model wrote."""

    label: str
    text: str
    code: bool


@dataclass(frozen=True)
class Entry:
    seq: int
    #: A CSS hint: start, message, model, assistant, request, decision, tool, error, budget,
    #: note, finish.
    tone: str
    title: str
    at: datetime
    offset: str
    facts: list[tuple[str, str]] = field(default_factory=list)
    blocks: list[Block] = field(default_factory=list)
    item_id: str | None = None
    failed: bool = False


def pretty(value: Any) -> str:
    """Arguments and other data as indented JSON; text stays text."""
    if isinstance(value, str):
        return value
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False, default=str)


def money(value: float) -> str:
    """US dollars to a hundredth of a cent; a tiny amount is not shown as zero."""
    if 0 < value < 0.0001:
        return "< $0.0001"
    return f"${value:.4f}" if value < 100 else f"${value:,.2f}"


def tool_name(wire: str) -> str:
    """ "crm__send_email" (the model's name for a tool) as "crm.send_email"."""
    server, sep, tool = wire.partition("__")
    return f"{server}.{tool}" if sep else wire


def entries(events: Sequence[Event]) -> list[Entry]:
    start = events[0].at if events else None
    # A tool's result repeats the arguments it ran with; its start need not show them too.
    with_result = {
        e.data.get("call_id")
        for e in events
        if e.kind is EventKind.TOOL_RESULT and e.data.get("args") is not None
    }
    out: list[Entry] = []
    for e in events:
        entry = _entry(e, _offset(e.at, start))
        if e.kind is EventKind.TOOL_STARTED and e.data.get("call_id") in with_result:
            entry = replace(entry, blocks=[])
        out.append(entry)
    return out


def _offset(at: datetime, start: datetime | None) -> str:
    if start is None:
        return ""
    seconds = (at - start).total_seconds()
    if seconds < 60:
        return f"+{seconds:.1f} s"
    if seconds < 3600:
        return f"+{int(seconds // 60)} min {int(seconds % 60)} s"
    return f"+{seconds / 3600:.1f} h"


def _ms(value: Any) -> str:
    try:
        ms = float(value)
    except (TypeError, ValueError):
        return "?"
    return f"{ms / 1000:.2f} s" if ms >= 1000 else f"{ms:.0f} ms"


def _entry(e: Event, offset: str) -> Entry:
    d = e.data
    base: dict[str, Any] = {"seq": e.seq, "at": e.at, "offset": offset}
    match e.kind:
        case EventKind.RUN_STARTED:
            return Entry(
                tone="start",
                title="Run started",
                facts=_facts(("by", d.get("by")), ("trigger", d.get("trigger"))),
                blocks=_blocks(("Input", d.get("input"))),
                **base,
            )
        case EventKind.USER_MESSAGE:
            return Entry(
                tone="message",
                title=f"Message from {d.get('by') or 'someone'}",
                facts=_facts(("via", d.get("channel"))),
                blocks=_blocks(("Text", d.get("text"))),
                **base,
            )
        case EventKind.MODEL_CALL:
            cost = d.get("cost_usd")
            attempts = d.get("attempts")
            return Entry(
                tone="model",
                title=f"Model call: {d.get('model') or 'model'}",
                facts=_facts(
                    ("tokens in", d.get("tokens_in")),
                    ("tokens out", d.get("tokens_out")),
                    ("latency", _ms(d.get("latency_ms")) if "latency_ms" in d else None),
                    ("cost", money(cost) if isinstance(cost, int | float) else "not priced"),
                    ("attempts", attempts if isinstance(attempts, int) and attempts > 1 else None),
                ),
                **base,
            )
        case EventKind.ASSISTANT_MESSAGE:
            calls = d.get("tool_calls") or []
            blocks = _blocks(("Message", d.get("text")))
            for call in calls:
                name = tool_name(str(call.get("name", "")))
                blocks += _blocks((f"Calls {name}", call.get("arguments") or {}))
            title = (
                f"Model asked for {len(calls)} tool call{'s' if len(calls) != 1 else ''}"
                if calls
                else "Model replied"
            )
            return Entry(tone="assistant", title=title, blocks=blocks, **base)
        case EventKind.TOOL_REQUEST:
            again = " (asked again)" if d.get("reasked") else ""
            return Entry(
                tone="request",
                title=f"Asked a person about {d.get('tool')}{again}",
                blocks=_blocks(("Proposed arguments", d.get("args") if again else None)),
                item_id=d.get("item_id"),
                **base,
            )
        case EventKind.DECISION:
            return _decision(d, base)
        case EventKind.TOOL_STARTED:
            return Entry(
                tone="tool",
                title=f"Tool {d.get('tool')} started",
                blocks=_blocks(("Arguments", d.get("args"))),
                **base,
            )
        case EventKind.TOOL_RESULT:
            if d.get("rejected"):
                title = f"Tool {d.get('tool')} not run: rejected"
            elif d.get("is_error"):
                title = f"Tool {d.get('tool')} failed"
            else:
                title = f"Tool {d.get('tool')} returned"
            return Entry(
                tone="error" if d.get("is_error") and not d.get("rejected") else "tool",
                title=title,
                facts=_facts(
                    ("duration", _ms(d.get("duration_ms")) if "duration_ms" in d else None)
                ),
                blocks=_blocks(("Arguments", d.get("args")), ("Result", d.get("text"))),
                failed=bool(d.get("is_error")),
                **base,
            )
        case EventKind.RUN_FINISHED:
            status = str(d.get("status") or "finished")
            return Entry(
                tone="finish",
                title=f"Run {status}",
                facts=_facts(("by", d.get("by"))),
                blocks=_blocks(("Result", d.get("result")), ("Error", d.get("error"))),
                failed=status != "done",
                **base,
            )
        case EventKind.BUDGET_REACHED:
            return Entry(
                tone="budget",
                title=f"Budget reached: {d.get('why') or ''}".rstrip(": "),
                blocks=_blocks(("Would extend by", d.get("extend"))),
                item_id=d.get("item_id"),
                **base,
            )
        case EventKind.BUDGET_EXTENDED:
            return Entry(
                tone="budget",
                title="Budget extended",
                facts=_facts(("by", d.get("by"))),
                blocks=_blocks(("Extended by", d.get("extend"))),
                **base,
            )
        case EventKind.ERROR:
            return Entry(tone="error", title="Error", blocks=_rest(d), failed=True, **base)
        case EventKind.TOOL_INTERRUPTED:
            return Entry(
                tone="error",
                title=f"Tool {d.get('tool')} interrupted",
                blocks=_blocks(("Note", d.get("note"))),
                **base,
            )
        case _:
            return Entry(tone="note", title=str(e.kind).replace("_", " ").capitalize(),
                         blocks=_rest(d), **base)  # fmt: skip


def _decision(d: dict[str, Any], base: dict[str, Any]) -> Entry:
    kind = str(d.get("decision"))
    who = d.get("actor") or "someone"
    verb = {
        "approve": "Approved",
        "edit": "Edited and approved",
        "reject": "Rejected",
        "expired": "Expired",
    }.get(kind, kind.capitalize())
    title = f"{verb} by {who}" if kind != "expired" else "Expired: nobody decided in time"
    blocks: list[Block] = []
    if kind == "edit":
        before, after = d.get("args_before") or {}, d.get("args") or {}
        blocks = [Block("Changed", _changes(before, after), code=True)]
        blocks += _blocks(("Arguments after", after))
    blocks += _blocks(("Reason", d.get("reason")))
    return Entry(
        tone="decision",
        title=title,
        facts=_facts(("via", d.get("channel"))),
        blocks=blocks,
        item_id=d.get("item_id"),
        **base,
    )


def _facts(*pairs: tuple[str, Any]) -> list[tuple[str, str]]:
    return [(k, str(v)) for k, v in pairs if v is not None and v != ""]


def _blocks(*pairs: tuple[str, Any]) -> list[Block]:
    return [
        Block(k, pretty(v), code=not isinstance(v, str))
        for k, v in pairs
        if v is not None and v != ""
    ]


def _rest(d: dict[str, Any]) -> list[Block]:
    return _blocks(*((str(k).replace("_", " ").capitalize(), v) for k, v in d.items()))


def _changes(before: dict[str, Any], after: dict[str, Any]) -> str:
    """One line per argument the edit changed: ``copies: 1 → 3``."""

    def show(value: Any) -> str:
        return json.dumps(value, ensure_ascii=False, default=str)

    lines = []
    for key in [*before, *(k for k in after if k not in before)]:
        if key not in after:
            lines.append(f"{key}: {show(before[key])} → (removed)")
        elif key not in before:
            lines.append(f"{key}: (not set) → {show(after[key])}")
        elif before[key] != after[key]:
            lines.append(f"{key}: {show(before[key])} → {show(after[key])}")
    return "\n".join(lines) or "(nothing: the same arguments)"
