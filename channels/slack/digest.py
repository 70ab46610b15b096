"""`SlackDigest`: the daily digest (`pizzabot.agent.digest`) as one direct message to each approver.

Titles come from skills and tools, so they are escaped like every other text the bot posts;
each item links to its web page, where it can be decided (its own card stays in its thread).
"""

from __future__ import annotations

from slack_sdk.web.async_client import AsyncWebClient

from pizzabot.agent.digest import Digest
from pizzabot.channels.slack.blocks import esc, item_url

__all__ = ["SlackDigest", "digest_text"]


def digest_text(digest: Digest) -> str:
    n = len(digest.items)
    lines = [f"*{n} decision{'s' if n != 1 else ''} wait{'s' if n == 1 else ''} for you*"]
    for item in digest.items:
        title = esc(item.title)
        shown = f"<{item_url(digest.base_url, item)}|{title}>" if digest.base_url else title
        whom = f" — {digest.for_whom(item)}" if digest.for_whom(item) else ""
        lines.append(f"• {shown}{whom} — waiting {digest.age(item)}")
    return "\n".join(lines)


class SlackDigest:
    """Posts each digest in the person's direct messages with the app."""

    def __init__(self, *, client: AsyncWebClient) -> None:
        self.client = client

    async def send_digest(self, address: str, digest: Digest) -> None:
        opened = await self.client.conversations_open(users=address)
        channel = str((opened.get("channel") or {}).get("id") or address)
        await self.client.chat_postMessage(
            channel=channel, text=digest_text(digest), unfurl_links=False, unfurl_media=False
        )
