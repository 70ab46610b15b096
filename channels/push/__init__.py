"""Web Push: a card that waits reaches a person's phone or desktop even with the page closed.

A person subscribes from the web page (`pizzabot.channels.web.routes_phone`); the server then sends
each new Action item, and each reminder and escalation of one, through the outbox like any
delivery: one per device, encrypted for the browser and signed with the server's VAPID key.
A push carries no tool name, no arguments and no run input (see `pizzabot.channels.push.channel`).

    channel.py   PushChannel: fans an item out to devices, sends one push, handles 410 Gone
    vapid.py     VapidKey: the server's key pair, made at first start, kept 0600
"""

from pizzabot.channels.push.channel import CHANNEL, PushChannel, payload
from pizzabot.channels.push.vapid import KEY_FILE, VapidKey, vapid_contact

__all__ = ["CHANNEL", "KEY_FILE", "PushChannel", "VapidKey", "payload", "vapid_contact"]
