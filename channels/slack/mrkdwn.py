"""Slack text: escaping what mrkdwn reads as markup, and the small pieces every message, modal
and Home tab is built from (text objects, sections, context lines, links, dates, people).

Its own module because every Slack view needs these and none of them knows what a card or a
modal is. Everything the model, a tool or a skill wrote is escaped before it reaches mrkdwn,
the top-level `text` included (Slack reads `<!channel>`, `<@U…>` and `<url|label>` there too).
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from pizzabot.agent.model import Item

__all__ = [
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
