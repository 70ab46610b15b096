"""Export a run's trace as OpenTelemetry spans: one trace per run, a span per model call and
per tool call, with token counts as attributes.

The event log already holds every timing, so spans are made from it when a run ends, with
their recorded start and end times. That keeps tracing out of the hot path and right across
restarts: a run that survived a crash still exports one whole trace. Tool arguments are not
exported (they may hold personal data); their names are.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer, set_span_in_context

from agent.model import Event, EventKind, Run


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
        d: dict[str, Any] = ev.data
        if ev.kind is EventKind.MODEL_CALL:
            latency = float(d.get("latency_ms") or 0)
            span = tracer.start_span(
                f"model {d.get('model')}",
                context=ctx,
                kind=SpanKind.CLIENT,
                start_time=_ns(ev.at - timedelta(milliseconds=latency)),
                attributes={
                    "gen_ai.request.model": str(d.get("model")),
                    "gen_ai.usage.input_tokens": int(d.get("tokens_in") or 0),
                    "gen_ai.usage.output_tokens": int(d.get("tokens_out") or 0),
                    "pizzabot.attempts": int(d.get("attempts") or 1),
                    **(
                        {"pizzabot.cost_usd": float(d["cost_usd"])}
                        if d.get("cost_usd") is not None
                        else {}
                    ),
                },
            )
            span.end(end_time=_ns(ev.at))
            tokens_in += int(d.get("tokens_in") or 0)
            tokens_out += int(d.get("tokens_out") or 0)
        elif ev.kind is EventKind.TOOL_STARTED:
            span = tracer.start_span(
                f"tool {d.get('tool')}",
                context=ctx,
                kind=SpanKind.CLIENT,
                start_time=_ns(ev.at),
                attributes={
                    "pizzabot.tool": str(d.get("tool")),
                    "pizzabot.call_id": str(d.get("call_id")),
                    "pizzabot.tool.arg_names": sorted((d.get("args") or {}).keys()),
                },
            )
            open_tools[str(d.get("call_id"))] = (span, ev)
        elif ev.kind is EventKind.TOOL_RESULT:
            opened = open_tools.pop(str(d.get("call_id")), None)
            if opened is None:  # refused, rejected or denied: no tool ran, but the model was told
                span = tracer.start_span(
                    f"tool {d.get('tool')} (not run)",
                    context=ctx,
                    start_time=_ns(ev.at),
                    attributes={"pizzabot.tool": str(d.get("tool"))},
                )
            else:
                span = opened[0]
            span.set_attribute("pizzabot.tool.is_error", bool(d.get("is_error")))
            span.set_attribute("pizzabot.tool.duration_ms", float(d.get("duration_ms") or 0))
            if d.get("is_error"):
                span.set_status(Status(StatusCode.ERROR, str(d.get("text", ""))[:200]))
            span.end(end_time=_ns(ev.at))
        elif ev.kind is EventKind.DECISION:
            root.add_event(
                "decision",
                timestamp=_ns(ev.at),
                attributes={
                    "pizzabot.decision": str(d.get("decision")),
                    "pizzabot.actor": str(d.get("actor")),
                    "pizzabot.channel": str(d.get("channel")),
                    "pizzabot.tool_call": str(d.get("call_id")),
                },
            )
    for span, started in open_tools.values():  # started, never finished (killed, cancelled)
        span.set_status(Status(StatusCode.ERROR, "no result"))
        span.end(end_time=_ns(max(end, started.at)))
    root.set_attribute("gen_ai.usage.input_tokens", tokens_in)
    root.set_attribute("gen_ai.usage.output_tokens", tokens_out)
    if run.error:
        root.set_status(Status(StatusCode.ERROR, run.error[:200]))
    root.end(end_time=_ns(end))
