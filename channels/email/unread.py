"""An Unread item's mail (a finished run, an FYI): its text and HTML, with a `notify` FYI's
Undo link (`pizzabot.channels.email.undo_links`) where the recipient may undo it, and how the
Undo went once someone clicked it."""

from __future__ import annotations

import html

from pizzabot.agent.model import Item
from pizzabot.agent.undo import undo_line

__all__ = ["unread_html", "unread_text"]

_FOLLOW_UP = (
    "Reply to this mail to send the run a follow-up message: it goes on with its whole history."
)


def _undo(item: Item, link: str | None) -> list[str]:
    """What the mail says of the FYI's Undo: where to click, or how it went."""
    undo = item.undo
    if undo is None:
        return []
    said = [undo_line(undo)]
    if undo.state == "offered" and link is not None:
        said.append(f"Undo it (this link asks you to confirm, and works once): {link}")
    return said


def unread_text(item: Item, *, can_decide: bool, undo_link: str | None) -> list[str]:
    lines = [item.title, "", item.body.strip() or "(no result text)", ""]
    lines += [*_undo(item, undo_link), ""] if item.undo is not None else []
    return [*lines, _FOLLOW_UP] if can_decide else lines


def unread_html(item: Item, *, can_decide: bool, undo_link: str | None) -> list[str]:
    e = html.escape
    blocks = [
        f"<h2>{e(item.title)}</h2>",
        f"<pre style='white-space:pre-wrap'>{e(item.body.strip())}</pre>",
    ]
    if item.undo is not None:
        blocks.append(f"<p>{e(undo_line(item.undo))}</p>")
        if item.undo.state == "offered" and undo_link is not None:
            blocks.append(
                f"<p><a href='{e(undo_link)}'>Undo it</a> (asks you to confirm; works once)</p>"
            )
    if can_decide:
        blocks.append(f"<p>{e(_FOLLOW_UP)}</p>")
    return blocks
