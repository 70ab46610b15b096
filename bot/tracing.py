"""OpenTelemetry wiring: when `OTEL_EXPORTER_OTLP_ENDPOINT` is set, every finished run is
exported as one trace over OTLP/HTTP (the SDK reads the standard OTEL_* variables). The SDK
is imported only then: a server that exports nothing does not pay for it at start."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING

from pizzabot.agent.store import Store

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter

log = logging.getLogger(__name__)


def provider(exporter: SpanExporter) -> TracerProvider:
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    # The standard variables name the service (OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES)
    # so that several bots can be told apart; "pizzabot" only when they name none.
    resource = Resource.create()
    if str(resource.attributes.get("service.name", "")).startswith("unknown_service"):
        resource = resource.merge(Resource({"service.name": "pizzabot"}))
    tp = TracerProvider(resource=resource)
    tp.add_span_processor(BatchSpanProcessor(exporter))
    return tp


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

    log.info("exporting run traces over OTLP")
    return provider(OTLPSpanExporter())


def flusher(tp: TracerProvider) -> Callable[[], Awaitable[None]]:
    """A closer that exports what is left at shutdown."""

    async def flush() -> None:
        # On a thread: an unreachable collector keeps the exporter retrying for seconds,
        # and the rest of the shutdown (channels, tools, the store) must not wait on the loop.
        await asyncio.to_thread(tp.shutdown)

    return flush
