"""The Slack app manifest asks for what the code uses: its events, command, scopes and modes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from pizzabot.channels.slack import SlackInbound

MANIFEST = Path(__file__).resolve().parent.parent / "manifests" / "slack-app.yaml"


def manifest() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(MANIFEST.read_text())
    return data


def test_the_manifest_subscribes_to_what_the_app_listens_for() -> None:
    m = manifest()
    settings = m["settings"]
    assert set(settings["event_subscriptions"]["bot_events"]) == {
        "app_home_opened",
        "app_mention",
        "message.im",
        "message.channels",
        "message.groups",
    }
    assert settings["interactivity"]["is_enabled"] is True
    assert settings["socket_mode_enabled"] is True  # local-first: no public URL needed
    [command] = m["features"]["slash_commands"]
    assert command["command"] == SlackInbound.command == "/pizza"
    assert m["features"]["app_home"]["messages_tab_enabled"] is True  # DMs to the bot
    assert m["features"]["app_home"]["home_tab_enabled"] is True  # the Home tab is the inbox


def test_the_manifest_grants_the_scopes_the_calls_need() -> None:
    scopes = set(manifest()["oauth_config"]["scopes"]["bot"])
    needed = {
        "chat:write",  # chat.postMessage, chat.update, chat.postEphemeral
        "im:write",  # conversations.open for a skill that delivers to a user
        "commands",  # /pizza
        "app_mentions:read",  # app_mention
        "channels:history",  # message.channels (thread replies)
        "groups:history",  # message.groups (thread replies in private channels)
        "im:history",  # message.im
    }
    assert needed <= scopes
