"""Reading what Slack sends: where a click happened, a modal's first field, a message's text
as the person typed it. Shared by every listener, so each reads a payload the same way."""

from __future__ import annotations

import re
from typing import Any

__all__ = ["first_input", "strip_mention", "unescape", "where"]


def unescape(text: str) -> str:
    # Slack escapes these three in message text; the run should read what the person typed.
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def where(body: dict[str, Any]) -> tuple[str | None, str | None]:
    """The conversation and thread a button was clicked in."""
    container = body.get("container") or {}
    channel = (body.get("channel") or {}).get("id") or container.get("channel_id")
    thread = (body.get("message") or {}).get("thread_ts") or container.get("thread_ts")
    return channel, thread


def first_input(view: dict[str, Any]) -> str:
    """The block id of a modal's first input: where an error about the whole form goes."""
    for block in view.get("blocks") or []:
        if block.get("type") == "input" and block.get("block_id"):
            return str(block["block_id"])
    return ""


def strip_mention(text: str, bot: str | None) -> str:
    """A message's text without the mention of the bot, as typed."""
    # Without the bot's id (auth.test not answered yet), drop a leading mention.
    text = text.replace(f"<@{bot}>", " ") if bot else re.sub(r"^\s*<@[A-Z0-9]+>", " ", text)
    return unescape(" ".join(text.split()))
