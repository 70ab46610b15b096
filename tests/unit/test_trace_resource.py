"""The service a bot's traces name: "pizzabot" unless the standard OpenTelemetry variables
name another, so that several bots sending to one collector can be told apart."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from pizzabot.agent.tracing import provider


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
