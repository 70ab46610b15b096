"""What the Slack listeners' helpers (grants, the Home tab, approve-all) get from the inbound
side: the store they read, the inbox and the policy, and two ways to answer a person. A
protocol, so those helpers and `SlackInbound` (which calls them) need not import each other.
"""

from __future__ import annotations

from typing import Protocol

import aiohttp
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from pizzabot.agent.inbox import Inbox
from pizzabot.agent.model import Decision
from pizzabot.agent.policy import Access
from pizzabot.agent.skills import SkillBook
from pizzabot.agent.store import AuditTrail, CardRefresh, DeliveryReader, ItemReader, RunReader

__all__ = ["SLACK_ERRORS", "SlackDesk", "SlackStore"]

#: What a failed Slack Web API call raises.
SLACK_ERRORS = (SlackApiError, aiohttp.ClientError, TimeoutError)


class SlackStore(ItemReader, RunReader, DeliveryReader, AuditTrail, CardRefresh, Protocol):
    """What the Slack side reads from the store, and where it audits."""


class SlackDesk(Protocol):
    """The inbound side, as its helpers use it (`channels.slack.inbound.SlackInbound`)."""

    store: SlackStore
    inbox: Inbox
    access: Access
    skills: SkillBook
    base_url: str

    async def tell(
        self,
        client: AsyncWebClient,
        *,
        channel: str | None,
        user: str,
        text: str,
        thread_ts: str | None = None,
    ) -> None:
        """An ephemeral note only `user` sees, next to where they acted."""
        ...

    async def decide(
        self,
        client: AsyncWebClient,
        *,
        item_id: str,
        decision: Decision,
        user: str,
        channel: str | None,
        thread_ts: str | None,
        retried: bool,
        seen: str | None = None,
    ) -> None:
        """Decide as the clicker, on the card whose digest is `seen`."""
        ...
