"""Discord: inbox items as messages with buttons, edits and reasons in modals, runs started
with `/pizza` and followed up from a run's result.

`DiscordChannel` posts and edits (the outbox's side); `DiscordInbound` answers interactions,
which reach the app's interactions endpoint only after `DiscordSignatureGate` verified their
Ed25519 signature; `render` draws messages and modals within Discord's limits; `serve` puts
the endpoint on the app and registers `/pizza`.
"""

from pizzabot.channels.discord.api import DiscordApi, DiscordError
from pizzabot.channels.discord.channel import DiscordChannel
from pizzabot.channels.discord.gate import DiscordSignatureGate
from pizzabot.channels.discord.inbound import Answer, DiscordInbound

__all__ = [
    "Answer",
    "DiscordApi",
    "DiscordChannel",
    "DiscordError",
    "DiscordInbound",
    "DiscordSignatureGate",
]
