"""What the CLI prints: tables that fit the terminal, a run's timeline, an item's whole card.

Everything here comes from the server, so nothing is ever read as Rich markup: every value
goes into a `rich.text.Text` (a skill's output may well contain ``[/oops]`` or ``[demo]``),
and the consoles have markup, emoji codes and highlighting off. Tables wrap long cells and
never cut an id: ids are what people type back. Timestamps are whole, in local time.

A run's timeline comes worded from the server (the `timeline` of `GET /api/runs/{id}`, in
the web page's words), so the CLI imports nothing of the server.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from rich.cells import cell_len
from rich.console import Console, Group, RenderableType
from rich.padding import Padding
from rich.table import Column, Table
from rich.text import Text

__all__ = [
    "console",
    "dump_json",
    "item_card",
    "table",
    "timeline",
    "when",
]

console = Console(markup=False, highlight=False, emoji=False)


def dump_json(data: Any) -> None:
    """`--json`: the server's answer as it came, for scripts (never wrapped, never styled)."""
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def when(iso: str | None) -> str:
    """An ISO time from the server as a whole local timestamp with its zone."""
    if not iso:
        return ""
    try:
        at = datetime.fromisoformat(iso)
    except ValueError:
        return iso
    if at.tzinfo is not None:
        at = at.astimezone()
    zone = at.strftime("%Z") or at.strftime("%z")
    return f"{at:%Y-%m-%d %H:%M:%S} {zone}".rstrip()


def compact(value: Any) -> str:
    """A value on one (wrappable) line: text stays text, the rest is JSON."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=str)


def arg_lines(args: dict[str, Any] | None) -> str:
    """Arguments one per line, `name: JSON value`, so a table cell wraps them readably."""
    return "\n".join(f"{k}: {compact(v)}" for k, v in (args or {}).items())


# -- tables ------------------------------------------------------------------------------


def id_column(header: str = "id") -> Column:
    """Never cut: at worst (a very narrow terminal) an id folds onto a second line."""
    return Column(header, no_wrap=True, overflow="fold")


def time_column(header: str) -> Column:
    return Column(header, no_wrap=True, overflow="fold")


def text_column(header: str, *, ratio: int | None = None) -> Column:
    return Column(header, overflow="fold", ratio=ratio)


#: A word longer than this may fold inside its cell: it does not force the record layout.
_LONG_WORD = 20


def _least_width(cols: Sequence[Column], cells: list[list[Text]]) -> int:
    """The width at which every cell shows whole words (and no_wrap cells whole lines)."""
    total = 1  # the left border; each column adds its padding and right border
    for i, col in enumerate(cols):
        texts = [str(col.header), *(row[i].plain for row in cells)]
        if col.no_wrap:
            need = max(cell_len(line) for t in texts for line in t.splitlines() or [""])
        else:
            need = min(_LONG_WORD, max(cell_len(w) for t in texts for w in t.split() or [""]))
        total += need + 3
    return total


def table(columns: Sequence[Column | str], rows: Iterable[Sequence[Any]]) -> RenderableType:
    """A table when the terminal can hold its longest words; else one record per row (the
    first column, then `header: value` lines), since a squeezed table breaks every word."""
    cols = [text_column(c) if isinstance(c, str) else c for c in columns]
    cells = [[v if isinstance(v, Text) else Text(compact(v)) for v in row] for row in rows]
    t = Table(*cols, highlight=False)
    for row in cells:
        t.add_row(*row)
    if _least_width(cols, cells) <= console.width:
        return t
    records: list[RenderableType] = []
    for row in cells:
        records.append(Text(row[0].plain, style="bold"))
        for col, cell in zip(cols[1:], row[1:], strict=True):
            if "\n" in cell.plain:
                records.append(_indent(Text(f"{col.header}:", style="dim"), 2))
                records.append(_indent(cell, 4))
            elif cell.plain:
                records.append(_indent(Text.assemble((f"{col.header}: ", "dim"), cell), 2))
    return Group(*records)


def empty(what: str) -> None:
    console.print(Text(f"(no {what})", style="dim"))


# -- a run's timeline --------------------------------------------------------------------


_TONES = {
    "start": "bold",
    "message": "cyan",
    "model": "dim",
    "assistant": "magenta",
    "request": "yellow",
    "decision": "bold green",
    "tool": "blue",
    "error": "bold red",
    "budget": "yellow",
    "finish": "bold",
}


def _indent(text: str | Text, left: int, style: str = "") -> Group:
    """Indented text whose wrapped lines keep the indent (one Padding a line: a multi-line
    Text would be padded with spaces to its longest line)."""
    body = text if isinstance(text, Text) else Text(text, style=style)
    return Group(*(Padding(line, (0, 0, 0, left), expand=False) for line in body.split("\n")))


def timeline(run: dict[str, Any]) -> None:
    """A run's header and its events as the web page words them: who decided, via which
    channel, the arguments before and after an edit, each tool's result."""
    usage = run.get("usage") or {}
    head = Text()
    head.append(f"Run {run['id']}", style="bold")
    head.append(f"  {run.get('skill', '')} · {run.get('status', '')}")
    console.print(head)
    facts = [
        f"trigger {run.get('trigger')}" if run.get("trigger") else "",
        f"created {when(run.get('created_at'))}",
        f"tokens {usage.get('tokens', 0)}",
        f"steps {usage.get('steps', 0)}",
    ]
    if usage.get("cost_usd"):
        facts.append(f"cost ${usage['cost_usd']:.4f}")
    if run.get("killed_by"):
        facts.append(f"killed by {run['killed_by']}")
    console.print(Text("  " + " · ".join(f for f in facts if f), style="dim"))
    console.print()
    entries = list(run.get("timeline") or [])
    kinds = {int(e.get("seq", 0)): str(e.get("kind")) for e in run.get("events") or []}
    for en in entries:
        at = datetime.fromisoformat(en["at"]).astimezone()
        line = Text(f"{en['offset']:>10}  {at:%H:%M:%S}  ", style="dim")
        line.append(en["title"], style=_TONES.get(en["tone"], ""))
        line.append(f"  ({kinds.get(en['seq'], en['tone'])})", style="dim")
        console.print(line)
        facts_ = [f"{k}: {v}" for k, v in en.get("facts") or []]
        if en.get("item_id"):
            facts_.append(f"item: {en['item_id']}")
        if facts_:
            console.print(_indent(" · ".join(facts_), 22))
        for b in en.get("blocks") or []:
            console.print(_indent(b["label"] + ":", 22, "dim"))
            console.print(_indent(b["text"], 24, "cyan" if b["code"] else ""))
    if not entries:
        empty("events yet")
    pending = [en["item_id"] for en in entries if en["tone"] == "request" and en.get("item_id")]
    if run.get("status") == "waiting" and pending:
        console.print()
        console.print(Text(f"Waiting for a decision: pizzabot item {pending[-1]}", style="bold"))


# -- an item's card ----------------------------------------------------------------------

_VERBS = {
    "approved": "Approved",
    "edited": "Edited and approved",
    "rejected": "Rejected",
    "expired": "Expired",
    "cancelled": "Closed",
}


def _section(title: str) -> None:
    console.print()
    console.print(Text(title, style="bold underline"))


def _field(label: str, value: str) -> None:
    line = Text(f"{label}: ", style="dim")
    line.append(value)
    console.print(_indent(line, 2))


def _block(label: str, text: str, *, code: bool = False) -> None:
    console.print(Text(f"  {label}:", style="dim"))
    console.print(_indent(text, 4, "cyan" if code else ""))


def _pretty(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


def item_card(item: dict[str, Any], run: dict[str, Any] | None) -> None:
    """The whole card, as the web page shows it: what the run is doing, the tool and its
    risk, the proposed arguments, and the decision (or how to make one)."""
    budget = item.get("kind") == "budget"
    console.print(Text(str(item.get("title", "")), style="bold"))
    meta = [
        f"item {item['id']}",
        str(item.get("box", "")),
        str(item.get("status", "")),
        f"skill {item.get('skill', '')}",
        f"created {when(item.get('created_at'))}",
    ]
    console.print(Text("  " + " · ".join(meta), style="dim"))
    run_line = f"run {item.get('run_id')}"
    if run is not None:
        run_line += f" ({run.get('status')})"
    console.print(Text(f"  {run_line}: pizzabot show {item.get('run_id')}", style="dim"))

    if item.get("box") != "action":
        _section("Text")
        console.print(_indent(str(item.get("body") or "(no text)"), 2))
        _undo(item)
        if item.get("status") == "unread":
            console.print()
            console.print(Text(f"Mark it read: pizzabot read {item['id']}", style="bold"))
        elif item.get("read_at"):
            _field("Read", when(item.get("read_at")))
        return

    _what_it_is_doing(item, run, budget=budget)
    if budget:
        _section("Budget")
        _block("Extending gives the run this much more", _pretty(item.get("args") or {}), code=True)
    else:
        _tool(item)
    _decision(item, budget=budget)


def _undo(item: dict[str, Any]) -> None:
    """A `notify` FYI's Undo: how to start it, or how it went."""
    undo = item.get("undo")
    if not undo:
        return
    _section("Undo")
    _field("Call", f"{undo.get('tool')} {json.dumps(undo.get('args') or {}, sort_keys=True)}")
    if undo.get("state") == "offered":
        console.print(Text(f"  Undo it: pizzabot undo {item['id']}", style="bold"))
        return
    by = f"{undo.get('by')} via {undo.get('via')} at {when(undo.get('at'))}"
    _field(str(undo.get("state")).capitalize(), by)
    if undo.get("outcome"):
        _block("It answered", str(undo["outcome"]))


def _what_it_is_doing(item: dict[str, Any], run: dict[str, Any] | None, *, budget: bool) -> None:
    requested = bool(item.get("requested"))  # an outside agent's request, not a model's call
    _section("The request" if requested else "What the run is doing")
    _field("Skill", str(item.get("skill", "")))
    if item.get("requested_by"):
        _field("Requested by", str(item["requested_by"]))
    if item.get("digest") and item.get("status") == "pending":
        # What `approve|edit|reject --seen` binds a decision to: this card, this version.
        _field("Card", f"{item['digest']} (version {item.get('version', 1)})")
    if run is not None and not requested:
        _block("Run input", str(run.get("input") or "(none)"))
    said = "Why" if budget else "What the agent says" if requested else "The model's last message"
    _block(said, str(item.get("body") or "(none)"))


def _tool(item: dict[str, Any]) -> None:
    _section("Tool")
    tool = str(item.get("tool") or "")
    server = item.get("server")
    name = tool.partition(".")[2] if server and tool.startswith(f"{server}.") else tool
    _field("Tool", f"{name} on server {server}" if server else name)
    risk = item.get("risk") or {}
    notes = []
    if risk.get("impact"):
        notes.append(f"{risk['impact']} impact")
    if risk.get("reversible") is not None:
        notes.append("can be undone" if risk["reversible"] else "cannot be undone")
    if risk.get("scope"):
        notes.append(f"scope: {risk['scope']}")
    _field("Risk", " · ".join(notes) or "the skill gives no risk notes for this tool")
    if (risk.get("approvals_required") or 1) > 1:
        approved = list(risk.get("approved") or [])
        count = f"{len(approved)} of {risk['approvals_required']} approved"
        _field("Approvals", f"{count}: {', '.join(approved)}" if approved else count)
    preview = risk.get("preview") or {}
    if preview:  # the tool server's text, as text (the server took control characters out)
        label = f"Preview — computed before approval, not what ran (by {preview.get('by')})"
        _block(label, str(preview.get("text") or ""))
    _block("Proposed arguments", _pretty(item.get("args") or {}), code=True)


def _decision(item: dict[str, Any], *, budget: bool) -> None:
    """How to decide a pending item; who decided a decided one, and what."""
    status = str(item.get("status", ""))
    if status == "pending":
        _section("Decide")
        iid = item["id"]
        lines = [f"pizzabot approve {iid}" + ("   (extend the budget)" if budget else "")]
        if not budget:
            lines.append(f"pizzabot edit {iid} --set NAME=VALUE   (or --args JSON)")
        lines.append(f"pizzabot reject {iid} REASON" + ("   (stop the run)" if budget else ""))
        for line in lines:
            console.print(Text("  " + line))
        return
    verb = _VERBS.get(status, status.capitalize())
    _section(verb)
    if status == "cancelled":
        console.print(Text("  The run ended before anyone decided."))
    else:
        who = Text("  ")
        who.append(f"{verb} by ")
        who.append(str(item.get("decided_by") or "someone"), style="bold")
        who.append(" via ")
        who.append(str(item.get("decided_via") or "?"), style="bold")
        if item.get("decided_at"):
            who.append(f" at {when(item.get('decided_at'))}")
        console.print(who)
    if item.get("reason"):
        _block("Reason", str(item["reason"]))
    if item.get("final_args") is not None and status in {"approved", "edited"}:
        _block("Final arguments", _pretty(item["final_args"]), code=True)
