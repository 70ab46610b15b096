"""A run's events as a timeline a person can read without developer tools.

The event log is the trace; this turns each event into a title, a few short facts (tokens,
latency, who decided via which channel) and blocks of longer text (arguments as indented
JSON, a tool's result, the model's message). Unknown kinds still show, with their raw data,
so a newer engine never makes events vanish from the page. A running tool's question (a
note) and its answer (the decision on the question item) read as a question and an answer.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, assert_never

from pizzabot.agent.events import (
    AssistantMessage,
    BudgetExtended,
    BudgetReached,
    DecisionMade,
    ErrorNoted,
    Event,
    ModelCall,
    Note,
    QuestionRemark,
    RunFinished,
    RunStarted,
    ToolInterrupted,
    ToolRequest,
    ToolResult,
    ToolStarted,
    UserMessage,
)
from pizzabot.agent.model import Approve, Edit, Expired, Reject

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
        e.payload.call_id
        for e in events
        if isinstance(e.payload, ToolResult) and e.payload.args is not None
    }
    # The items a running tool asked through: their decisions are answers, not approvals.
    questions = frozenset(
        e.payload.question.item_id
        for e in events
        if isinstance(e.payload, Note) and e.payload.question is not None
        if e.payload.question.item_id is not None
    )
    starts: Counter[str] = Counter()
    out: list[Entry] = []
    for e in events:
        if isinstance(e.payload, DecisionMade) and e.payload.item_id in questions:
            out.append(
                _answer(e.payload, {"seq": e.seq, "at": e.at, "offset": _offset(e.at, start)})
            )
            continue
        entry = _entry(e, _offset(e.at, start))
        if isinstance(e.payload, ToolStarted):
            starts[e.payload.call_id] += 1
            if starts[e.payload.call_id] > 1:  # a crash lost the earlier start's result
                entry = replace(entry, title=f"{entry.title} (attempt {starts[e.payload.call_id]})")
            elif e.payload.call_id in with_result:
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
    base: dict[str, Any] = {"seq": e.seq, "at": e.at, "offset": offset}
    p = e.payload
    match p:
        case RunStarted():
            facts = _facts(("by", p.by), ("trigger", p.trigger))
            return Entry(
                tone="start",
                title="Run started",
                facts=facts,
                blocks=_blocks(("Input", p.input)),
                **base,
            )
        case UserMessage():
            title, facts = f"Message from {p.by or 'someone'}", _facts(("via", p.channel))
            return Entry(
                tone="message", title=title, facts=facts, blocks=_blocks(("Text", p.text)), **base
            )
        case ModelCall():
            return _model_call(p, base)
        case AssistantMessage():
            return _assistant(p, base)
        case ToolRequest():
            return _request(p, base)
        case DecisionMade():
            return _decision(p, base)
        case ToolStarted():
            blocks = _blocks(("Arguments", p.args))
            # Started without a person: say which rule let it, when one did.
            facts = _facts(("policy", f"auto: {p.rule}" if p.rule else None))
            return Entry(
                tone="tool", title=f"Tool {p.tool} started", facts=facts, blocks=blocks, **base
            )
        case ToolResult():
            return _tool_result(p, base)
        case ToolInterrupted():
            return _interrupted(p, base)
        case RunFinished():
            return _finished(p, base)
        case BudgetReached():
            title, blocks = (
                f"Budget reached: {p.why}".rstrip(": "),
                _blocks(("Would extend by", p.extend)),
            )
            return Entry(tone="budget", title=title, blocks=blocks, item_id=p.item_id, **base)
        case BudgetExtended():
            facts, blocks = _facts(("by", p.by)), _blocks(("Extended by", p.extend))
            return Entry(tone="budget", title="Budget extended", facts=facts, blocks=blocks, **base)
        case ErrorNoted():
            return Entry(tone="error", title="Error", blocks=_rest(p.stored()), failed=True, **base)
        case Note(question=QuestionRemark() as asked):
            return _question(asked, base)
        case Note():
            return Entry(tone="note", title="Note", blocks=_rest(p.stored()), **base)
        case _:
            assert_never(p)


def _question(q: QuestionRemark, base: dict[str, Any]) -> Entry:
    if q.refused is not None:
        return Entry(
            tone="error",
            title=f"{q.tool} asked a question that cannot be shown: answered cancel",
            blocks=_blocks(("Question", q.message), ("Link", q.url), ("Why", q.refused)),
            **base,
        )
    return Entry(
        tone="request",
        title=f"{q.tool} asked a person" + (" to open a link" if q.url else ""),
        blocks=_blocks(("Question", q.message), ("Link", q.url)),
        item_id=q.item_id,
        **base,
    )


def _answer(p: DecisionMade, base: dict[str, Any]) -> Entry:
    """The decision on a question item, as the answer the tool got."""
    blocks: list[Block] = []
    match p.decision:
        case Approve() | Edit():
            title = f"Answered by {p.actor or 'someone'}: accept"
            values = p.args if p.args and set(p.args) != {"url"} else None
            blocks = _blocks(("Answer", values))
        case Reject():
            title = f"Declined by {p.actor or 'someone'}"
        case Expired(reason=reason):
            title = "Cancelled: " + (reason or "no answer")
        case _:
            assert_never(p.decision)
    return Entry(
        tone="decision",
        title=title,
        facts=_facts(("via", p.channel)),
        blocks=blocks,
        item_id=p.item_id,
        **base,
    )


def _request(p: ToolRequest, base: dict[str, Any]) -> Entry:
    again = " (asked again)" if p.reasked else ""
    return Entry(
        tone="request",
        title=f"Asked a person about {p.tool}{again}",
        facts=_facts(("policy", f"ask: {p.rule}" if p.rule else None)),
        blocks=_blocks(("Proposed arguments", p.args if again else None)),
        item_id=p.item_id,
        **base,
    )


def _interrupted(p: ToolInterrupted, base: dict[str, Any]) -> Entry:
    return Entry(
        tone="error",
        title=f"Tool {p.tool} interrupted",
        facts=[("outcome", "unknown: it may already have happened")],
        blocks=_blocks(("Note", p.why)),
        **base,
    )


def _finished(p: RunFinished, base: dict[str, Any]) -> Entry:
    return Entry(
        tone="finish",
        title=f"Run {p.status}",
        facts=_facts(("by", p.by)),
        blocks=_blocks(("Result", p.result), ("Error", p.error)),
        failed=p.status != "done",
        **base,
    )


def _model_call(p: ModelCall, base: dict[str, Any]) -> Entry:
    return Entry(
        tone="model",
        title=f"Model call: {p.model or 'model'}",
        facts=_facts(
            ("tokens in", p.tokens_in),
            ("tokens out", p.tokens_out),
            ("latency", _ms(p.latency_ms)),
            ("cost", money(p.cost_usd) if p.cost_usd is not None else "not priced"),
            ("attempts", p.attempts if p.attempts > 1 else None),
        ),
        **base,
    )


def _assistant(p: AssistantMessage, base: dict[str, Any]) -> Entry:
    blocks = _blocks(("Message", p.text))
    for call in p.tool_calls:
        blocks += _blocks((f"Calls {tool_name(call.name)}", call.arguments))
    n = len(p.tool_calls)
    title = f"Model asked for {n} tool call{'s' if n != 1 else ''}" if n else "Model replied"
    return Entry(tone="assistant", title=title, blocks=blocks, **base)


def _tool_result(p: ToolResult, base: dict[str, Any]) -> Entry:
    if p.rejected:
        title = f"Tool {p.tool} not run: rejected"
    elif p.denied_by:
        title = f"Tool {p.tool} not run: denied"
    elif p.is_error:
        title = f"Tool {p.tool} failed"
    else:
        title = f"Tool {p.tool} returned"
    denied = f"deny: {p.denied_by}" if p.denied_by else None
    return Entry(
        tone="error" if p.is_error and not (p.rejected or p.denied_by) else "tool",
        title=title,
        facts=_facts(("policy", denied), ("duration", _ms(p.duration_ms) if not denied else None)),
        blocks=_blocks(("Arguments", p.args), ("Result", p.text)),
        failed=p.is_error,
        **base,
    )


def _decision(p: DecisionMade, base: dict[str, Any]) -> Entry:
    blocks: list[Block] = []
    match p.decision:
        case Approve():
            title = f"Approved by {p.actor or 'someone'}"
        case Edit(args=after):
            title = f"Edited and approved by {p.actor or 'someone'}"
            blocks = [Block("Changed", _changes(p.args_before or {}, after), code=True)]
            blocks += _blocks(("Arguments after", after))
        case Reject(reason=reason):
            title = f"Rejected by {p.actor or 'someone'}"
            blocks = _blocks(("Reason", reason))
        case Expired(reason=reason):
            title = "Expired: nobody decided in time"
            blocks = _blocks(("Reason", reason))
        case _:
            assert_never(p.decision)
    return Entry(
        tone="decision",
        title=title,
        facts=_facts(("via", p.channel)),
        blocks=blocks,
        item_id=p.item_id,
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
