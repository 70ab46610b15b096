"""A call's preview on its Slack card (`pizzabot.agent.preview`): the tool server's text, so
hostile, shown as text under the words that say it is a preview and not what ran.

Escaped like every other text (`esc`: no link, mention or channel ping comes alive), set in
a code block that the text cannot end (its backquotes are swapped for a look-alike), and cut
to fit one section with a link to the whole card on the web page.
"""

from __future__ import annotations

from typing import Any

from pizzabot.agent.model import PREVIEW_LABEL, Item
from pizzabot.channels.slack.mrkdwn import esc, link, section

__all__ = ["preview_blocks", "preview_text"]

# Room in one section (3,000 characters) for the preview, its label and the link.
_PREVIEW_CUT = 2600


def preview_blocks(item: Item, *, url: str) -> list[dict[str, Any]]:
    """The section showing `item`'s preview, or none where it has no preview."""
    text = preview_text(item, url=url)
    return [] if text is None else [section(text)]


def preview_text(item: Item, *, url: str, cut: int = _PREVIEW_CUT) -> str | None:
    """`item`'s preview as mrkdwn under its label, cut to `cut` characters (escaped, as
    sent) with a link to the web page; None where it has no preview."""
    preview = item.risk.preview
    if preview is None:
        return None
    text = esc(preview.text.replace("`", "ˋ"))
    more = ""
    if len(text) > cut:
        text, more = text[:cut] + "…", f"\n{link(url, 'whole preview on the web page')}"
    label = f"*🔍 {PREVIEW_LABEL}* (by `{esc(preview.by)}`)"
    if preview.failed:
        return f"{label}\n_{text}_"
    return f"{label}\n```{text}```{more}"
