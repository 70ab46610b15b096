"""Telegram: inbox items as messages with inline buttons, edits and reasons as replies to a
prompt, runs started with `/pizza` (or any message in a private chat) and followed up by
replying to a run's card.

`TelegramChannel` delivers and edits (the outbox's side); `TelegramInbound` turns updates
into engine calls, whether they come from the webhook (`TelegramSecretGate` checks its secret
token first) or from long polling (`Poller`); `render` draws the messages; `serve` puts the
webhook on the app and starts hearing Telegram either way.
"""

from pizzabot.channels.telegram.api import TelegramApi, TelegramError
from pizzabot.channels.telegram.channel import TelegramChannel
from pizzabot.channels.telegram.gate import TelegramSecretGate
from pizzabot.channels.telegram.inbound import TelegramInbound
from pizzabot.channels.telegram.polling import Poller

__all__ = [
    "Poller",
    "TelegramApi",
    "TelegramChannel",
    "TelegramError",
    "TelegramInbound",
    "TelegramSecretGate",
]
