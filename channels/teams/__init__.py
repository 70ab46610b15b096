"""Microsoft Teams through the Bot Framework: inbox items as Adaptive Cards whose buttons only
an approver sees, edits in a dialog, runs started in a personal chat or by mentioning the bot,
and followed up in a run's thread.

`TeamsChannel` posts and replaces cards through the connector (`Connector`, with the app's
token); `TeamsInbound` answers activities, which reach it only once `TeamsTokenGate` verified
their Bot Framework token (`BotFrameworkKeys`); `cards` draws the Adaptive Cards; `serve`
puts the channel and the messaging endpoint on the app.
"""

from pizzabot.channels.teams.auth import AppToken, BotFrameworkKeys, Caller, TokenRefused
from pizzabot.channels.teams.channel import TeamsChannel
from pizzabot.channels.teams.connector import Connector, ConnectorError
from pizzabot.channels.teams.gate import CALLER, TeamsTokenGate
from pizzabot.channels.teams.inbound import Reply, TeamsInbound

__all__ = [
    "CALLER",
    "AppToken",
    "BotFrameworkKeys",
    "Caller",
    "Connector",
    "ConnectorError",
    "Reply",
    "TeamsChannel",
    "TeamsInbound",
    "TeamsTokenGate",
    "TokenRefused",
]
