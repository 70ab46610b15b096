"""Logs are plain or JSON lines with run and item ids, and never carry tokens or passwords."""

from __future__ import annotations

import io
import json
import logging

from pizzabot.bot.logs import JsonFormatter, RedactingFilter, redact


def test_secrets_are_redacted_from_messages_and_arguments() -> None:
    line = redact(
        "auth Bearer abc.def-123 slack xoxb-1-2-3 app xapp-1-A-2 key sk-live_abcdef123456 "
        "url https://x/?token=s3cret&a=1 password=hunter2"
    )
    for secret in (
        "abc.def-123",
        "xoxb-1-2-3",
        "xapp-1-A-2",
        "sk-live_abcdef123456",
        "s3cret",
        "hunter2",
    ):
        assert secret not in line
    assert line.count("[redacted]") == 6 and "a=1" in line


def test_json_lines_carry_run_and_item_ids_and_no_secret() -> None:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(RedactingFilter())
    handler.setFormatter(JsonFormatter())
    log = logging.getLogger("pizzabot.test-logs")
    log.addHandler(handler)
    log.propagate = False
    try:
        log.warning(
            "delivery failed with token=%s", "xoxb-9-9-9", extra={"run_id": "r1", "item_id": "i1"}
        )
    finally:
        log.removeHandler(handler)
    record = json.loads(stream.getvalue())
    assert record["run_id"] == "r1" and record["item_id"] == "i1" and record["level"] == "WARNING"
    assert "xoxb-9-9-9" not in stream.getvalue()
