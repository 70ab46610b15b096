"""A served bot carries only what its configuration uses: libraries a feature needs are
loaded when the feature is first used, not at start (asked of a fresh interpreter that builds
and shuts down a whole server)."""

from __future__ import annotations

from pathlib import Path

from tests.imports import loaded_by_a_server

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
