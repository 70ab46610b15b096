"""What a bot's traces say beyond the run itself: the service they name ("pizzabot" unless
the standard OpenTelemetry variables name another, so that several bots sending to one
collector can be told apart), and a decision's call only where there is one."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from pizzabot.agent.events import DecisionMade, Event
from pizzabot.agent.model import Approve, Run, RunStatus
from pizzabot.agent.tracing import export_run, provider


def service(monkeypatch: pytest.MonkeyPatch, **env: str) -> dict[str, object]:
    for name in ("OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    tp = provider(InMemorySpanExporter())
    try:
        return dict(tp.resource.attributes)
    finally:
        tp.shutdown()


def test_traces_name_pizzabot_when_nothing_names_the_service(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert service(monkeypatch)["service.name"] == "pizzabot"


def test_otel_service_name_names_the_service(monkeypatch: pytest.MonkeyPatch) -> None:
    assert service(monkeypatch, OTEL_SERVICE_NAME="pizzabot-eu")["service.name"] == "pizzabot-eu"


def test_otel_resource_attributes_name_the_service_and_add_their_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    attrs = service(
        monkeypatch, OTEL_RESOURCE_ATTRIBUTES="service.name=bot-b,deployment.environment=prod"
    )
    assert attrs["service.name"] == "bot-b" and attrs["deployment.environment"] == "prod"


def test_a_decision_on_no_call_carries_no_call_id_in_the_trace() -> None:
    """A question's or a budget item's decision answers no tool call: its span event says
    so by leaving the call out, not with the text "None"."""
    exporter = InMemorySpanExporter()
    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(exporter))
    at = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
    run = Run(
        id="r1",
        skill="ops",
        status=RunStatus.DONE,
        input="",
        trigger="api",
        created_at=at,
        updated_at=at,
    )
    decided = [
        DecisionMade(item_id="i1", decision=Approve(), actor="ann", channel="web"),
        DecisionMade(item_id="i2", call_id="c7", decision=Approve(), actor="ann", channel="web"),
    ]
    export_run(tp.get_tracer("test"), run, [Event("r1", k, d, at) for k, d in enumerate(decided)])

    [root] = exporter.get_finished_spans()
    calls = [dict(e.attributes or {}).get("pizzabot.tool_call") for e in root.events]
    assert calls == [None, "c7"]
