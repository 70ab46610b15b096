"""Plugs triggers into the app: routes at creation, receivers in the lifespan."""

from __future__ import annotations

from fastapi import FastAPI

from bot.services import Services
from bot.settings import Settings


def install(app: FastAPI, settings: Settings) -> None:
    return None


async def start(svc: Services, app: FastAPI) -> None:
    return None
