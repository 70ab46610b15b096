"""A call's preview in its mail (`pizzabot.agent.preview`): the tool server's text, so
hostile, shown as text under the words that say it is a preview and not what ran.

In the plain-text part every line of it is indented and marked, so it cannot pass for the
mail's own instructions; in the HTML part it is escaped inside a `<pre>`.
"""

from __future__ import annotations

import html

from pizzabot.agent.model import PREVIEW_LABEL, Item

__all__ = ["preview_html", "preview_lines"]


def _heading(item: Item) -> str | None:
    preview = item.risk.preview
    if preview is None:
        return None
    return f"{PREVIEW_LABEL} (by {preview.by})"


def preview_lines(item: Item) -> list[str]:
    """The plain-text lines of `item`'s preview, after a blank line; none without one."""
    heading = _heading(item)
    if heading is None or item.risk.preview is None:
        return []
    return ["", f"{heading}:", *(f"  | {line}" for line in item.risk.preview.text.split("\n"))]


def preview_html(item: Item) -> str:
    """The HTML of `item`'s preview; empty without one."""
    heading = _heading(item)
    if heading is None or item.risk.preview is None:
        return ""
    e = html.escape
    return (
        f"<p><b>{e(heading)}:</b></p>"
        "<pre style='white-space:pre-wrap;background:#f6f6f6;padding:8px;"
        f"border-left:3px solid #bbb'>{e(item.risk.preview.text)}</pre>"
    )
