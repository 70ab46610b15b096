"""Audit rows as OpenTelemetry log records, for a SIEM that collects over OTLP.

`pizzabot audit export --otlp` sends what it would print: one log record per row, in the
order the rows were written, with every field and the row's chain fields (`seq`,
`prev_hash`, `hash`) as attributes, so the chain can be checked on the collector's side
too. Batches go straight to the OTLP/HTTP exporter and each answer is checked: a collector
that refuses a batch or cannot be reached fails the command instead of losing rows quietly.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import TYPE_CHECKING, Any

# The server's host reads `logs_endpoint` for every admin command; the SDK only when sending.
if TYPE_CHECKING:
    from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
    from opentelemetry.sdk._logs import ReadableLogRecord
    from opentelemetry.sdk.resources import Resource

__all__ = ["OtlpExportError", "log_record", "logs_endpoint", "send"]

_BATCH = 256
_EVENT = "pizzabot.audit"


class OtlpExportError(Exception):
    """The collector refused rows or could not be reached; rows from `sent` on did not go."""


def logs_endpoint(env: Mapping[str, str]) -> str | None:
    """Where OTLP logs go by the standard variables: the logs endpoint as given, or the
    general endpoint's `/v1/logs`; None when neither is set."""
    if logs := env.get("OTEL_EXPORTER_OTLP_LOGS_ENDPOINT"):
        return logs
    if base := env.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
        return f"{base.rstrip('/')}/v1/logs"
    return None


def log_record(entry: dict[str, Any], resource: Resource) -> ReadableLogRecord:
    """One audit row (as `audit export` prints it) as an OpenTelemetry log record."""
    from opentelemetry._logs import LogRecord, SeverityNumber
    from opentelemetry.sdk._logs import LogRecordLimits, ReadableLogRecord
    from opentelemetry.sdk.util.instrumentation import InstrumentationScope

    at = datetime.fromisoformat(entry["at"])
    attributes = {
        f"pizzabot.audit.{name}": value
        for name in ("seq", "action", "actor", "channel", "run_id", "item_id", "prev_hash", "hash")
        if (value := entry.get(name)) is not None
    }
    attributes["pizzabot.audit.detail"] = json.dumps(entry.get("detail"), sort_keys=True)
    who = entry.get("actor") or "the service"
    record = LogRecord(
        timestamp=int(at.timestamp() * 1_000_000_000),
        severity_number=SeverityNumber.INFO,
        severity_text="INFO",
        body=f"{entry['action']} by {who}",
        attributes=attributes,
        event_name=_EVENT,
    )
    # The detail is the row's own JSON: cut nothing of it, the chain's hash covers all of it.
    limits = LogRecordLimits(max_attribute_length=None)
    return ReadableLogRecord(record, resource, InstrumentationScope(_EVENT), limits)


@contextmanager
def _quiet_exporter() -> Iterator[None]:
    """The exporter logs each failed try; the command says it once, in its own words."""
    logger = logging.getLogger("opentelemetry.exporter.otlp.proto.http")
    before = logger.level
    logger.setLevel(logging.CRITICAL + 1)  # its modules' loggers inherit the level
    try:
        yield
    finally:
        logger.setLevel(before)


async def send(entries: AsyncIterator[dict[str, Any]], *, endpoint: str) -> int:
    """Send every entry to the OTLP/HTTP logs `endpoint` in order; the number sent."""
    from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
    from opentelemetry.sdk.resources import Resource

    exporter = OTLPLogExporter(endpoint=endpoint)
    resource = Resource.create({"service.name": "pizzabot"})
    sent = 0
    batch: list[ReadableLogRecord] = []

    async def flush() -> None:
        nonlocal sent
        if batch:
            await asyncio.to_thread(_export, exporter, batch, endpoint, sent)
            sent += len(batch)
            batch.clear()

    try:
        with _quiet_exporter():
            async for entry in entries:
                batch.append(log_record(entry, resource))
                if len(batch) >= _BATCH:
                    await flush()
            await flush()
    finally:
        exporter.shutdown()  # type: ignore[no-untyped-call]
    return sent


def _export(
    exporter: OTLPLogExporter, batch: Sequence[ReadableLogRecord], endpoint: str, sent: int
) -> None:
    from opentelemetry.sdk._logs.export import LogRecordExportResult

    if exporter.export(batch) is LogRecordExportResult.SUCCESS:
        return
    first = (batch[0].log_record.attributes or {}).get("pizzabot.audit.seq")
    raise OtlpExportError(
        f"the OTLP collector at {endpoint} did not take the audit rows from seq {first} on "
        f"({sent} were sent before it refused them or could not be reached)"
    )
