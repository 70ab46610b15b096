"""Slack text: escaping what mrkdwn reads as markup, and the small pieces every message, modal
and Home tab is built from (text objects, sections, context lines, links, dates, people).

Its own module because every Slack view needs these and none of them knows what a card or a
modal is. Everything the model, a tool or a skill wrote is escaped before it reaches mrkdwn,
the top-level `text` included (Slack reads `<!channel>`, `<@U…>` and `<url|label>` there too).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from pizzabot.agent.model import Item, ItemKind

__all__ = [
    "args_label",
    "args_text",
    "asked_text",
    "clip",
    "context",
    "esc",
    "item_url",
    "link",
    "mrkdwn",
    "option",
    "plain",
    "run_url",
    "section",
    "when",
    "who",
]

_SECTION_MAX = 3000  # characters in a section
_OPTION_TEXT_MAX = 75
_SLACK_USER = re.compile(r"[UW][A-Z0-9]+")
_VALUE_CUT = 280  # a proposed value longer than this is cut in a message
_ARGS_BUDGET = 2600  # characters of arguments in one message, before the link takes over
_ASKED_CUT = 100  # characters of who asked, or of the rule, on one line


def esc(text: str) -> str:
    """Escape what Slack's mrkdwn reads as markup (its three control characters)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def plain(text: str, limit: int = 150) -> dict[str, Any]:
    return {"type": "plain_text", "text": clip(text, limit) or " ", "emoji": True}


def mrkdwn(text: str) -> dict[str, Any]:
    return {"type": "mrkdwn", "text": text[:_SECTION_MAX] or " "}


def clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: max(limit - 1, 0)] + "…"


def section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": mrkdwn(text)}


def context(text: str) -> dict[str, Any]:
    return {"type": "context", "elements": [mrkdwn(text)]}


def link(url: str, label: str) -> str:
    return f"<{url}|{esc(label)}>"


def option(value: str, label: str | None = None) -> dict[str, Any]:
    return {"text": plain(label or value, _OPTION_TEXT_MAX), "value": value}


def item_url(base_url: str, item: Item) -> str:
    return f"{base_url.rstrip('/')}/items/{item.id}"


def run_url(base_url: str, run_id: str) -> str:
    return f"{base_url.rstrip('/')}/runs/{run_id}"


def who(name: str | None, via: str | None) -> str:
    """A decider as Slack shows them: Slack users as mentions, anyone else by name."""
    if not name:
        return "someone"
    if via == "slack" and _SLACK_USER.fullmatch(name):
        return f"<@{name}>"
    return esc(name)


def when(at: datetime | None) -> str:
    """A time every reader sees in their own time zone (Slack's date formatting)."""
    if at is None:
        return "earlier"
    fallback = at.strftime("%Y-%m-%d %H:%M UTC")
    return f"<!date^{int(at.timestamp())}^{{date_short_pretty}} at {{time}}|{fallback}>"


def _render_value(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def args_text(
    args: Mapping[str, Any] | None,
    *,
    more_url: str | None,
    value_cut: int = _VALUE_CUT,
    budget: int = _ARGS_BUDGET,
) -> str:
    """Arguments one per line, readable; values longer than `value_cut` and lines past
    `budget` characters (escaped, as sent) cut, with a link to the web page (`more_url`)
    or, without one, words saying the web page has them whole."""
    if not args:
        return "_(no arguments)_"
    lines: list[str] = []
    used = 0
    for key, value in args.items():
        shown = _render_value(value)
        cut = len(shown) > value_cut
        if cut:
            shown = shown[:value_cut] + "…"
        line = f"*{esc(clip(str(key), value_cut))}*: {esc(shown)}"
        if cut:
            line += f" {link(more_url, 'see all')}" if more_url else " _(cut here)_"
        if used + len(line) > budget:
            more = "more arguments on the web page"
            lines.append(f"… {link(more_url, more) if more_url else more}")
            break
        lines.append(line)
        used += len(line) + 1
    return "\n".join(lines)


def args_label(item: Item) -> str:
    """What an item's arguments are to the person deciding it."""
    if item.kind is ItemKind.BUDGET:
        return "Extension"
    if item.kind is ItemKind.QUESTION:
        return "Proposed answer"
    return "Proposed arguments"


def asked_text(item: Item) -> list[str]:
    """Who asked and the policy that asked (what the card's digest binds besides the
    arguments), one short line each, escaped; empty where the item says none."""
    lines: list[str] = []
    if item.requested_by:
        lines.append(f"🙋 Requested by {esc(clip(item.requested_by, _ASKED_CUT))}")
    if item.risk.rule:
        lines.append(f"📏 Asked by {esc(clip(item.risk.rule, _ASKED_CUT))}")
    if item.risk.approvals_text:
        lines.append(f"👥 {esc(clip(item.risk.approvals_text, _ASKED_CUT))}")
    return lines
