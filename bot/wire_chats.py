"""The chat channels beside Slack (Teams, Discord, Telegram), for the composition root: each
one's wiring module (`bot.wire_teams`, `bot.wire_discord`, `bot.wire_telegram`) asked in
turn, so the root names them in one place.

Every wiring module has the same shape: whether the settings turn it on and reach it, the
channel items are delivered on (`outlet`), what answers the platform (`build`), its route
(`install`), the check that comes before a body is read (`gate`), and `start`. A module
imports its channel package only when it is on.
"""

from __future__ import annotations

import logging
from typing import Protocol

from fastapi import FastAPI

from agent.channel import Channel
from agent.policy import Access
from bot import wire_discord, wire_teams, wire_telegram
from bot.core import Core
from bot.services import ChatParts, Services
from bot.settings import Settings
from store.sql import SqlStore

__all__ = ["build", "guard", "install", "outlets", "reach", "start"]

log = logging.getLogger("pizzabot.chats")


class Wire(Protocol):
    NAME: str

    def reaches(self, settings: Settings) -> bool: ...

    def outlet(self, settings: Settings, *, store: SqlStore) -> Channel | None: ...

    def build(
        self, settings: Settings, *, channel: Channel, core: Core, store: SqlStore, access: Access
    ) -> ChatParts: ...

    def install(self, app: FastAPI, settings: Settings) -> None: ...

    def gate(self, app: FastAPI, settings: Settings) -> None: ...


# Each module's `build` takes the channel its own `outlet` made (`build` is handed it by
# name), a pairing a protocol cannot say: hence the ignore.
_WIRES: tuple[Wire, ...] = (wire_teams, wire_discord, wire_telegram)  # type: ignore[assignment]


def outlets(settings: Settings, *, store: SqlStore) -> list[Channel]:
    """The chat channels the settings turn on, each ready to deliver."""
    found = (wire.outlet(settings, store=store) for wire in _WIRES)
    return [channel for channel in found if channel is not None]


def reach(settings: Settings) -> dict[str, bool]:
    """Whether servers with these settings deliver on each chat channel."""
    return {wire.NAME: wire.reaches(settings) for wire in _WIRES}


def build(
    settings: Settings, channels: list[Channel], *, core: Core, store: SqlStore, access: Access
) -> dict[str, ChatParts]:
    """What answers each platform whose channel is in `channels`."""
    by_name = {c.name: c for c in channels}
    parts: dict[str, ChatParts] = {}
    for wire in _WIRES:
        channel = by_name.get(wire.NAME)
        if channel is not None:
            parts[wire.NAME] = wire.build(
                settings, channel=channel, core=core, store=store, access=access
            )
    return parts


def install(app: FastAPI, settings: Settings) -> None:
    for wire in _WIRES:
        wire.install(app, settings)


def guard(app: FastAPI, settings: Settings) -> None:
    """Each platform's check of its inbound requests, before any route reads their body."""
    for wire in _WIRES:
        wire.gate(app, settings)


def start(svc: Services) -> None:
    for name, parts in svc.chats.items():
        parts.start(svc)
        nobody = [s.name for s in svc.ctx.skills.all() if not s.approvers_for(None, name)]
        if nobody:
            log.warning(
                "%s: nobody can decide items of these skills there (no approvers.%s): %s",
                name.capitalize(),
                name,
                ", ".join(nobody),
            )
