"""OpenTelemetry wiring: when `OTEL_EXPORTER_OTLP_ENDPOINT` is set, every finished run is
exported as one trace over OTLP/HTTP (the SDK reads the standard OTEL_* variables). The SDK
is imported only then: a server that exports nothing does not pay for it at start."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING

from pizzabot.agent.store import Store

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider

log = logging.getLogger(__name__)


def run_end_hook(store: Store, tp: TracerProvider) -> Callable[[str], Awaitable[None]]:
    from pizzabot.agent.tracing import export_run

    tracer = tp.get_tracer("pizzabot")

    async def on_run_end(run_id: str) -> None:
        run = await store.get_run(run_id)
        export_run(tracer, run, await store.events(run_id))

    return on_run_end


def exporter(env: Mapping[str, str]) -> TracerProvider | None:
    """The OTLP trace provider when the environment names an endpoint, else None."""
    if not env.get("OTEL_EXPORTER_OTLP_ENDPOINT") and not env.get(
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
    ):
        return None
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    from pizzabot.agent.tracing import provider

    log.info("exporting run traces over OTLP")
    return provider(OTLPSpanExporter())
