"""An AG-UI interrupt's `expiresAt` bounds how long its card waits for a person."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from ag_ui.core import Interrupt

from pizzabot.client.agui import _until


def interrupt(expires_at: str | None) -> Interrupt:
    return Interrupt(id="i", reason="input", expires_at=expires_at)


def test_the_card_waits_no_longer_than_the_interrupt_lasts() -> None:
    soon = (datetime.now(UTC) + timedelta(seconds=120)).isoformat()
    assert 100 < (_until(interrupt(soon), 3600) or 0) <= 120
    assert _until(interrupt(soon), 30) == 30
    assert 100 < (_until(interrupt(soon), None) or 0) <= 120


def test_a_past_or_unreadable_expiry() -> None:
    assert _until(interrupt("2001-01-01T00:00:00Z"), 3600) == 1.0  # the least a card waits
    assert _until(interrupt("tomorrow"), 3600) == 3600
    assert _until(interrupt(None), None) is None
