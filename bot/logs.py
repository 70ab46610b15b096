"""Logging setup: plain or JSON lines, and a filter that keeps secrets out of every record.

The filter is the same :class:`pizzabot.agent.redaction.Redactor` that cleans what runs store, given the
server's own secret values (the API token, every secret setting) besides the shapes of
well-known keys: a library that logs a request or an error with a password in it gets
`[redacted]` there, in the message and in a traceback alike."""

from __future__ import annotations

import json
import logging
import re
from typing import Any

from pizzabot.agent.redaction import Redactor
from pizzabot.bot.settings import Settings

_shapes = Redactor()
# Logs are read by more people than runs are: take any Slack-token-like or key=value secret,
# whatever its length, on top of the shapes the redactor knows.
_LOOSE = re.compile(
    r"(xox[abposr]-[A-Za-z0-9-]+|xapp-[A-Za-z0-9-]+|sk-[A-Za-z0-9_-]{8,}|Bearer\s+[A-Za-z0-9._~+/-]+"
    r"|(?:token|password|api_key|secret)=[^\s&]+)",
    re.IGNORECASE,
)


def redact(text: str) -> str:
    """Known key shapes only; records pass the server's own values too (setup_logging)."""
    return _LOOSE.sub("[redacted]", _shapes(text))


class RedactingFilter(logging.Filter):
    def __init__(self, redactor: Redactor | None = None) -> None:
        super().__init__()
        self.redactor = redactor or _shapes

    def _clean(self, text: str) -> str:
        return _LOOSE.sub("[redacted]", self.redactor(text))

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = self._clean(record.getMessage())
        record.args = None
        exc_info = record.exc_info
        if exc_info and not record.exc_text:
            # The formatter caches the traceback's text here: clean it once, for every handler.
            record.exc_text = self._clean(logging.Formatter().formatException(exc_info))
        elif record.exc_text:
            record.exc_text = self._clean(record.exc_text)
        return True


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "at": self.formatTime(record),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key in ("run_id", "item_id"):
            if hasattr(record, key):
                out[key] = getattr(record, key)
        if record.exc_text:
            out["exc"] = record.exc_text  # already redacted by the filter
        elif record.exc_info:
            out["exc"] = redact(self.formatException(record.exc_info))
        return json.dumps(out)


def setup_logging(settings: Settings, *, token: str | None = None) -> None:
    handler = logging.StreamHandler()
    handler.addFilter(RedactingFilter(Redactor.of(token, *settings.secret_values())))
    handler.setFormatter(
        JsonFormatter()
        if settings.log_json
        else logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(settings.log_level.upper())
    # Alembic tells every step of a migration at INFO; `pizzabot.store.migrate` sums it up in one line.
    for noisy in ("LiteLLM", "httpx", "mcp", "aiosqlite", "apscheduler", "alembic"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
