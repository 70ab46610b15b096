"""A served bot carries only what its configuration uses: libraries a feature needs are
loaded when the feature is first used, not at start (asked of a fresh interpreter that builds
and shuts down a whole server)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.imports import loaded_by, loaded_by_a_server

#: Sending a Web Push loads these (pywebpush brings aiohttp and requests along), and so does
#: a request's callback httpx (which brings its command line's rich and pygments); the first
#: passkey ceremony loads webauthn; the first arguments checked against a schema, jsonschema.
FIRST_USE = ["pywebpush", "aiohttp", "requests", "httpx", "rich", "pygments", "webauthn"]
FIRST_USE += ["jsonschema", "referencing"]
#: A first start makes its new database from the tables' declarations, without Alembic (nor the
#: Mako it brings); a start with the schema current loads it neither. Only a migration does.
MIGRATING = ["alembic", "mako"]
#: A server without Slack, mail, PostgreSQL, a litellm-routed model or A2A needs none of these.
UNCONFIGURED = ["slack_bolt", "slack_sdk", "aioimaplib", "aiosmtplib", "asyncpg", "litellm", "a2a"]
#: Nor, without a shift calendar among its groups, the iCalendar readers; nor, without an
#: OTLP endpoint, the OpenTelemetry SDK.
UNCONFIGURED += ["icalendar", "recurring_ical_events", "opentelemetry.sdk"]


def test_a_default_server_loads_no_push_sender_nor_passkeys_nor_what_it_is_not_configured_for(
    tmp_path: Path,
) -> None:
    # Push and passkeys are on by default (the push key is made at start), yet nothing is
    # sent until a person subscribes and a card arrives, and no ceremony runs until a person
    # adds or uses a passkey.
    assert loaded_by_a_server(tmp_path, {}, among=FIRST_USE + UNCONFIGURED + MIGRATING) == []


def test_the_command_a_server_starts_with_loads_no_http_client() -> None:
    # `pizzabot serve` answers /healthz sooner for not importing the CLI's HTTP client.
    assert loaded_by(["pizzabot.bot.main"], among=["httpx"]) == []


def test_only_a_server_whose_skills_have_mcp_servers_loads_the_mcp_sdk_and_before_it_is_ready(
    tmp_path: Path,
) -> None:
    assert loaded_by_a_server(tmp_path, {}, among=["mcp", "mcp.client"]) == []
    skill = {
        "name": "tooled",
        "instructions": "Use the tool.",
        "model": "openai/none",
        "mcp_servers": {"t": {"command": "python", "args": ["-m", "no_such_server"]}},
    }
    (tmp_path / "tooled.yaml").write_text(json.dumps(skill))
    # Loaded by the build itself, before the server says it is ready (the server is never
    # started here, so no warm-up runs): a request then never waits for the SDK on the loop.
    assert loaded_by_a_server(tmp_path, {}, among=["mcp.client", "mcp.client.stdio"]) == [
        "mcp.client",
        "mcp.client.stdio",
    ]
