"""What the redactor removes from a provider's or a tool's error text, and what it leaves."""

from __future__ import annotations

import pytest

from pizzabot.agent.redaction import REDACTED, Redactor


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "Incorrect API key provided: sk-proj-abcDEF123456",
            f"Incorrect API key provided: {REDACTED}",
        ),
        ("invalid x-api-key sk-ant-api03-abcdefgh", f"invalid x-api-key {REDACTED}"),
        ("slack said xoxb-1234-5678-abcdefgh", f"slack said {REDACTED}"),
        ("socket xapp-1-A0B1-2345-abcdef", f"socket {REDACTED}"),
        ("Authorization: Bearer eyJhbGciOi.abc-def_123", f"Authorization: Bearer {REDACTED}"),
        ("github ghp_abcdefghijklmnopqrstuvwxyz0123", f"github {REDACTED}"),
        ("aws AKIAABCDEFGHIJKLMNOP denied", f"aws {REDACTED} denied"),
        ("GET /v1/models?key=AIzaSyA-1234567890abcdefghijklmnop", f"GET /v1/models?key={REDACTED}"),
        ("api_key=abcd1234&x=1", f"api_key={REDACTED}&x=1"),
        ('{"password": "hunter22"}', f'{{"password": "{REDACTED}"}}'),
        ("postgres://bot:s3cret@db/pizza", f"postgres://bot:{REDACTED}@db/pizza"),
    ],
)
def test_well_known_key_shapes_are_redacted(text: str, expected: str) -> None:
    assert Redactor()(text) == expected


def test_given_values_are_redacted_wherever_they_appear_and_short_ones_are_not() -> None:
    redact = Redactor.of("pz-live-7Qm2Xc9L", "x", None, "")

    assert redact("key pz-live-7Qm2Xc9L; again:pz-live-7Qm2Xc9L") == (
        f"key {REDACTED}; again:{REDACTED}"
    )
    assert redact("x marks the spot") == "x marks the spot"


def test_a_secret_that_contains_another_is_not_left_half_shown() -> None:
    redact = Redactor.of("abcdefgh", "abcdefgh-longer-one")

    assert redact("was abcdefgh-longer-one") == f"was {REDACTED}"


@pytest.mark.parametrize(
    "text",
    [
        "token budget reached: 1200 of 1000 tokens",
        "the CRM is down",
        "HTTP 401 from https://api.example.com/v1/chat/completions",
        "model openai/gpt-4o failed after 4 attempts: RateLimitError (HTTP 429)",
    ],
)
def test_ordinary_error_text_is_left_as_it_is(text: str) -> None:
    assert Redactor.of("pz-live-7Qm2Xc9L")(text) == text
