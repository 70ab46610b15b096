"""Logging setup: plain or JSON lines, and a filter that keeps secrets out of every record."""

from __future__ import annotations

import json
import logging
import re
from typing import Any

from bot.settings import Settings

_SECRET = re.compile(
    r"(xox[abposr]-[A-Za-z0-9-]+|xapp-[A-Za-z0-9-]+|sk-[A-Za-z0-9_-]{8,}|Bearer\s+[A-Za-z0-9._~+/-]+"
    r"|(?:token|password|api_key|secret)=[^\s&]+)",
    re.IGNORECASE,
)


def redact(text: str) -> str:
    return _SECRET.sub("[redacted]", text)


class RedactingFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = redact(record.getMessage())
        record.args = None
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
        if record.exc_info:
            out["exc"] = redact(self.formatException(record.exc_info))
        return json.dumps(out)


def setup_logging(settings: Settings) -> None:
    handler = logging.StreamHandler()
    handler.addFilter(RedactingFilter())
    handler.setFormatter(
        JsonFormatter()
        if settings.log_json
        else logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(settings.log_level.upper())
    # Alembic tells every step of a migration at INFO; `store.migrate` sums it up in one line.
    for noisy in ("LiteLLM", "httpx", "mcp", "aiosqlite", "apscheduler", "alembic"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
