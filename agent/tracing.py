"""Export a run's trace as OpenTelemetry spans: one trace per run, a span per model call and
per tool call, with token counts as attributes.

The event log already holds every timing, so spans are made from it when a run ends, with
their recorded start and end times. That keeps tracing out of the hot path and right across
restarts: a run that survived a crash still exports one whole trace. Tool arguments are not
exported (they may hold personal data); their names are.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from opentelemetry.context import Context
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer, set_span_in_context

from pizzabot.agent.events import DecisionMade, Event, ModelCall, ToolResult, ToolStarted
from pizzabot.agent.model import EventKind, Run

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter


def _ns(at: datetime) -> int:
    return int(at.timestamp() * 1_000_000_000)


def _segment(events: list[Event]) -> list[Event]:
    """The events of the latest stretch of work (a follow-up starts a new trace)."""
    ends = [i for i, e in enumerate(events) if e.kind is EventKind.RUN_FINISHED]
    if len(ends) >= 2:
        return events[ends[-2] + 1 :]
    return events


def export_run(tracer: Tracer, run: Run, events: list[Event]) -> None:
    events = _segment(events)
    if not events:
        return
    start, end = events[0].at, events[-1].at
    root = tracer.start_span(
        f"run {run.skill}",
        kind=SpanKind.INTERNAL,
        start_time=_ns(start),
        attributes={
            "pizzabot.run.id": run.id,
            "pizzabot.skill": run.skill,
            "pizzabot.trigger": run.trigger,
            "pizzabot.run.status": str(run.status),
        },
    )
    ctx = set_span_in_context(root)
    tokens_in = tokens_out = 0
    open_tools: dict[str, tuple[Span, Event]] = {}
    for ev in events:
        p = ev.payload
        match p:
            case ModelCall():
                _model_span(tracer, ctx, ev, p)
                tokens_in += p.tokens_in
                tokens_out += p.tokens_out
            case ToolStarted():
                open_tools[p.call_id] = (_start_tool_span(tracer, ctx, ev, p), ev)
            case ToolResult():
                opened = open_tools.pop(p.call_id, None)
                _end_tool_span(tracer, ctx, ev, p, opened[0] if opened else None)
            case DecisionMade():
                said = {
                    "pizzabot.decision": p.decision.kind,
                    "pizzabot.actor": p.actor,
                    "pizzabot.channel": p.channel,
                }
                if p.call_id is not None:  # a question or a budget item answers no call
                    said["pizzabot.tool_call"] = p.call_id
                root.add_event("decision", timestamp=_ns(ev.at), attributes=said)
            case _:
                pass
    for span, started in open_tools.values():  # started, never finished (killed, cancelled)
        span.set_status(Status(StatusCode.ERROR, "no result"))
        span.end(end_time=_ns(max(end, started.at)))
    root.set_attribute("gen_ai.usage.input_tokens", tokens_in)
    root.set_attribute("gen_ai.usage.output_tokens", tokens_out)
    if run.error:
        root.set_status(Status(StatusCode.ERROR, run.error[:200]))
    root.end(end_time=_ns(end))


def _model_span(tracer: Tracer, ctx: Context, ev: Event, p: ModelCall) -> None:
    span = tracer.start_span(
        f"model {p.model}",
        context=ctx,
        kind=SpanKind.CLIENT,
        start_time=_ns(ev.at - timedelta(milliseconds=p.latency_ms)),
        attributes={
            "gen_ai.request.model": p.model,
            "gen_ai.usage.input_tokens": p.tokens_in,
            "gen_ai.usage.output_tokens": p.tokens_out,
            "pizzabot.attempts": p.attempts,
            **({"pizzabot.cost_usd": p.cost_usd} if p.cost_usd is not None else {}),
        },
    )
    span.end(end_time=_ns(ev.at))


def _end_tool_span(
    tracer: Tracer, ctx: Context, ev: Event, p: ToolResult, span: Span | None
) -> None:
    if span is None:  # refused, rejected or denied: no tool ran, but the model was told
        span = tracer.start_span(
            f"tool {p.tool} (not run)",
            context=ctx,
            start_time=_ns(ev.at),
            attributes={"pizzabot.tool": p.tool},
        )
    span.set_attribute("pizzabot.tool.is_error", p.is_error)
    span.set_attribute("pizzabot.tool.duration_ms", p.duration_ms)
    if p.is_error:
        span.set_status(Status(StatusCode.ERROR, p.text[:200]))
    span.end(end_time=_ns(ev.at))


def _start_tool_span(tracer: Tracer, ctx: Context, ev: Event, p: ToolStarted) -> Span:
    return tracer.start_span(
        f"tool {p.tool}",
        context=ctx,
        kind=SpanKind.CLIENT,
        start_time=_ns(ev.at),
        attributes={
            "pizzabot.tool": p.tool,
            "pizzabot.call_id": p.call_id,
            "pizzabot.tool.arg_names": sorted(p.args),
        },
    )


def provider(exporter: SpanExporter) -> TracerProvider:
    """A tracer provider sending to `exporter` (the SDK is imported only when one is made)."""
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


def flusher(tp: TracerProvider) -> Callable[[], Awaitable[None]]:
    """A closer that exports what is left at shutdown."""

    async def flush() -> None:
        # On a thread: an unreachable collector keeps the exporter retrying for seconds,
        # and the rest of the shutdown (channels, tools, the store) must not wait on the loop.
        await asyncio.to_thread(tp.shutdown)

    return flush
