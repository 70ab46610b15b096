"""Teams, Discord and Telegram are wired only when configured: a server without one imports
nothing of it (asked of a fresh interpreter that builds a whole server), a worker addresses
cards to the ones its servers deliver on, and a half-configured one stays off."""

from __future__ import annotations

from pathlib import Path

from pydantic import SecretStr

from pizzabot.bot import wire_chats
from pizzabot.bot.outlets import reach
from pizzabot.bot.settings import Settings
from tests.imports import loaded_by_a_server

CHAT_MODULES = [
    "pizzabot.channels.chat",
    "pizzabot.channels.teams",
    "pizzabot.channels.discord",
    "pizzabot.channels.telegram",
    "jwt",
]
TELEGRAM = {"PIZZABOT_TELEGRAM_BOT_TOKEN": "1:x", "PIZZABOT_TELEGRAM_API_URL": "http://127.0.0.1:9"}


def test_a_server_loads_only_the_chat_channels_it_is_configured_for(tmp_path: Path) -> None:
    assert loaded_by_a_server(tmp_path / "none", {}, among=CHAT_MODULES) == []
    only = loaded_by_a_server(tmp_path / "telegram", TELEGRAM, among=CHAT_MODULES)
    assert only == ["pizzabot.channels.chat", "pizzabot.channels.telegram"]


def test_a_worker_addresses_cards_to_the_chat_channels_its_servers_deliver_on() -> None:
    on = Settings(
        telegram_bot_token=SecretStr("1:x"),
        discord_bot_token=SecretStr("d"),
        discord_application_id="1",
        discord_public_key="ab" * 32,
        teams_app_id="app",
        teams_app_password=SecretStr("secret"),
    )
    assert {"telegram", "discord", "teams"} <= reach(on)
    assert not {"telegram", "discord", "teams"} & reach(Settings())


def test_a_half_configured_chat_channel_stays_off_and_says_why() -> None:
    discord = Settings(discord_bot_token=SecretStr("d"), discord_public_key="not-hex")
    assert wire_chats.enabled(discord, "discord") and not wire_chats.reach(discord)["discord"]
    assert any("PUBLIC_KEY" in p for p in wire_chats.problems(discord, "discord"))
    webhook = Settings(telegram_bot_token=SecretStr("1:x"), telegram_mode="webhook")
    assert [p.split(" ")[0] for p in wire_chats.problems(webhook, "telegram")] == [
        "PIZZABOT_TELEGRAM_WEBHOOK_SECRET",
        "PIZZABOT_PUBLIC_URL",
    ]
