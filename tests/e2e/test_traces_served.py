"""Run traces from a served bot, as an operator's OpenTelemetry collector receives them.

A real `pizzabot serve` process with `OTEL_EXPORTER_OTLP_ENDPOINT` naming a real OTLP/HTTP
collector on a local socket (`tests.peers.otlp`, which decodes the protobuf requests as a
collector does) finishes a run started through the API, its model a scripted OpenAI-compatible
server and its tools the test MCP server over stdio. The collector then holds that run as one
trace: a root span carrying the run's id, skill, trigger, status and token totals, a child per
model call and per tool call (a failed tool marked as an error), all under
`service.name = pizzabot`, and the API token nowhere in it. With the endpoint unset, or the
`otel` setting off, a served bot sends the collector nothing, not even when it shuts down and
flushes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.peers.otlp import Collector, collector
from tests.peers.server import TOKEN
from tests.peers.stack import Reply, Stack, ToolCall, turns
from tests.waiting import eventually

#: One turn that looks the API token up (a secret pasted where it should not be) and calls a
#: broken tool, then the answer.
SCRIPT = turns(
    Reply(
        text="Looking.",
        tool_calls=[ToolCall("crm__lookup", {"query": TOKEN}), ToolCall("crm__fail", {})],
    ),
    Reply(text="done"),
)
ERROR = 2  # opentelemetry.proto.trace.v1.Status.STATUS_CODE_ERROR
#: The trace of the run above, by span name.
NAMES = sorted(
    [
        "run test",
        "model openai/scripted",
        "model openai/scripted",
        "tool crm.lookup",
        "tool crm.fail",
    ]
)


def _trace_of(otlp: Collector, run_id: str) -> list[dict[str, Any]] | None:
    """Every span of the run's trace once the whole trace has arrived."""
    roots = [s for s in otlp.spans if s["attributes"].get("pizzabot.run.id") == run_id]
    if len(roots) != 1:
        return None
    spans = [s for s in otlp.spans if s["trace_id"] == roots[0]["trace_id"]]
    return spans if sorted(s["name"] for s in spans) == NAMES else None


def _mentions(value: Any, secret: str) -> bool:
    if isinstance(value, dict):
        return any(_mentions(k, secret) or _mentions(v, secret) for k, v in value.items())
    if isinstance(value, list):
        return any(_mentions(v, secret) for v in value)
    return secret in str(value)


async def test_a_finished_run_reaches_the_collector_as_one_trace(tmp_path: Path) -> None:
    with collector() as otlp:
        env = {"OTEL_EXPORTER_OTLP_ENDPOINT": otlp.url, "OTEL_BSP_SCHEDULE_DELAY": "100"}
        async with Stack(tmp_path, script=SCRIPT, env=env) as st:
            run = await st.start_run("test", f"look up {TOKEN}")
            run = await st.wait_run(run["id"], {"done"})
            spans = await eventually(
                lambda: _trace_of(otlp, run["id"]),
                what=f"the trace of run {run['id']} at the collector",
                context=lambda: f"spans: {[s['name'] for s in otlp.spans]}\n{st.server.log()}",
            )

    (root,) = (s for s in spans if not s["parent_span_id"])
    assert root["name"] == "run test"
    assert {k: v for k, v in root["attributes"].items() if k.startswith("pizzabot.")} == {
        "pizzabot.run.id": run["id"],
        "pizzabot.skill": "test",
        "pizzabot.trigger": "api",
        "pizzabot.run.status": "done",
    }
    children = [s for s in spans if s is not root]
    assert {s["parent_span_id"] for s in children} == {root["span_id"]}
    for s in children:
        assert root["start_time_unix_nano"] <= s["start_time_unix_nano"]
        assert s["start_time_unix_nano"] <= s["end_time_unix_nano"] <= root["end_time_unix_nano"]

    models = [s["attributes"] for s in children if s["name"].startswith("model ")]
    assert {m["gen_ai.request.model"] for m in models} == {"openai/scripted"}
    for key in ("gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens"):
        assert all(m[key] > 0 for m in models)
        assert root["attributes"][key] == sum(m[key] for m in models)

    tools = {s["name"]: s for s in children if s["name"].startswith("tool ")}
    lookup, fail = tools["tool crm.lookup"], tools["tool crm.fail"]
    assert lookup["attributes"]["pizzabot.tool.arg_names"] == ["query"]
    assert lookup["attributes"]["pizzabot.tool.is_error"] is False
    assert lookup["status"]["code"] != ERROR and root["status"]["code"] != ERROR
    assert fail["attributes"]["pizzabot.tool.is_error"] is True
    assert fail["status"] == {
        "code": ERROR,
        "message": "Error executing tool fail: the CRM is down",
    }

    assert all(s["resource"]["service.name"] == "pizzabot" for s in otlp.spans)
    # The token was the run's input and a tool's argument: no span, event, status or resource
    # of anything the bot sent carries it.
    assert not any(_mentions(s, TOKEN) for s in otlp.spans)


@pytest.mark.parametrize(
    ("named", "settings"),
    [
        pytest.param(False, {}, id="endpoint-unset"),
        pytest.param(True, {"PIZZABOT_OTEL": "false"}, id="otel-setting-off"),
    ],
)
async def test_a_bot_not_told_to_export_sends_the_collector_nothing(
    tmp_path: Path, named: bool, settings: dict[str, str]
) -> None:
    with collector() as otlp:
        # Blank, not merely left out: the tests' own environment may name a collector.
        env = {
            "OTEL_EXPORTER_OTLP_ENDPOINT": otlp.url if named else "",
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "",
            **settings,
        }
        async with Stack(tmp_path, script=SCRIPT, env=env) as st:
            run = await st.start_run("test", "look up Ann")
            await st.wait_run(run["id"], {"done"})
            log = st.server.log()
            st.server.stop()  # a bot that exports sends what it still holds as it stops
        assert otlp.requests == 0 and otlp.spans == []
    assert "exporting run traces over OTLP" not in log
