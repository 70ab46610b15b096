"""Plugs Discord (channels/discord) into the app; off until it is built."""

from __future__ import annotations

from fastapi import FastAPI

from agent.channel import Channel
from agent.policy import Access
from bot.core import Core
from bot.services import ChatParts
from bot.settings import Settings
from store.sql import SqlStore

NAME = "discord"


def reaches(settings: Settings) -> bool:
    return False


def outlet(settings: Settings, *, store: SqlStore) -> Channel | None:
    return None


def build(
    settings: Settings, *, channel: Channel, core: Core, store: SqlStore, access: Access
) -> ChatParts:
    raise NotImplementedError


def install(app: FastAPI, settings: Settings) -> None:
    return None


def gate(app: FastAPI, settings: Settings) -> None:
    return None
