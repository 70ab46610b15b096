"""The server's own secret values never reach its log, in a message or a traceback, whatever
their shape: a library that logs a failed login with the password it sent is cleaned too."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from pizzabot.bot.logs import setup_logging
from pizzabot.bot.settings import Settings

PASSWORD = "correct horse battery staple"  # no known key shape: only its value can catch it
TOKEN = "made-at-first-start-0123456789"


@pytest.mark.parametrize("json_lines", [False, True])
def test_secret_values_are_redacted_from_messages_and_tracebacks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], json_lines: bool
) -> None:
    settings = Settings(smtp_password=PASSWORD, log_json=json_lines, data_dir=str(tmp_path))
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    try:
        setup_logging(settings, token=TOKEN)
        log = logging.getLogger("some.library")
        log.warning("login failed for bot with %s", PASSWORD)
        try:
            raise RuntimeError(f"server said: bad token {TOKEN}")
        except RuntimeError:
            log.exception("while sending")
    finally:
        root.handlers[:], level = saved
        root.setLevel(level)
    written = capsys.readouterr().err
    assert "login failed for bot with [redacted]" in written
    assert "RuntimeError" in written and "bad token [redacted]" in written
    assert PASSWORD not in written and TOKEN not in written
