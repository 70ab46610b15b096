"""Discord: inbox items as messages with buttons, edits and reasons in modals, runs started
with `/pizza` and followed up from a run's result.

`DiscordChannel` posts and edits (the outbox's side); `DiscordInbound` answers interactions,
which reach the app's interactions endpoint only after `DiscordSignatureGate` verified their
Ed25519 signature; `render` draws messages and modals within Discord's limits.
"""

from channels.discord.api import DiscordApi, DiscordError
from channels.discord.channel import DiscordChannel
from channels.discord.gate import DiscordSignatureGate
from channels.discord.inbound import Answer, DiscordInbound

__all__ = [
    "Answer",
    "DiscordApi",
    "DiscordChannel",
    "DiscordError",
    "DiscordInbound",
    "DiscordSignatureGate",
]
