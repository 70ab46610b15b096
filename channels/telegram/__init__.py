"""Telegram: inbox items as messages with inline buttons, edits and reasons as replies to a
prompt, runs started with `/pizza` (or any message in a private chat) and followed up by
replying to a run's card.

`TelegramChannel` delivers and edits (the outbox's side); `TelegramInbound` turns updates
into engine calls, whether they come from the webhook (`TelegramSecretGate` checks its secret
token first) or from long polling (`Poller`); `render` draws the messages.
"""

from channels.telegram.api import TelegramApi, TelegramError
from channels.telegram.channel import TelegramChannel
from channels.telegram.gate import TelegramSecretGate
from channels.telegram.inbound import TelegramInbound
from channels.telegram.polling import Poller

__all__ = [
    "Poller",
    "TelegramApi",
    "TelegramChannel",
    "TelegramError",
    "TelegramInbound",
    "TelegramSecretGate",
]
