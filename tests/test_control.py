"""Budgets pause a run for a human instead of failing it; traces export as OpenTelemetry."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from pizzabot.agent.model import Approve, Box, ItemKind, ItemStatus, Reject
from pizzabot.agent.policy import Principal
from pizzabot.agent.skills import Budget
from pizzabot.agent.testing.scripts import Reply, ToolCall, last_tool_result
from pizzabot.agent.tracing import export_run
from tests.peers.inproc import InProcess
from tests.waiting import eventually


def keep_looking(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Reply:
    """A model that never stops calling tools: only a budget ends it."""
    return Reply(text="still looking", tool_calls=[ToolCall("crm__lookup", {"query": "Ann " * 20})])


async def _budget_item(h: InProcess, run_id: str) -> Any:
    await h.wait(run_id, {"waiting"})
    (item,) = await h.store.list_items(box=Box.ACTION, status=ItemStatus.PENDING, run_id=run_id)
    assert item.kind is ItemKind.BUDGET
    return item


async def test_the_step_budget_pauses_the_run_and_extending_lets_it_go_on(tmp_path: Path) -> None:
    async with InProcess(tmp_path, keep_looking, skill={"budget": {"steps": 3}}) as h:
        run = await h.runs.start("test", "find Ann", by=Principal.owner("api"))
        item = await _budget_item(h, run.id)
        assert "step budget reached: 3 of 3" in item.body and item.args == {"steps": 3}
        assert (await h.store.get_run(run.id)).usage.steps == 3
        await h.inbox.decide(item.id, Approve(), by=Principal.owner("api"))
        second = None
        await h.wait(run.id, {"waiting"})
        for pending in await h.store.list_items(
            box=Box.ACTION, status=ItemStatus.PENDING, run_id=run.id
        ):
            second = pending
        assert second is not None and "6 of 6" in second.body
        assert (await h.store.get_run(run.id)).usage.steps == 6
        await h.inbox.decide(second.id, Reject("enough"), by=Principal.owner("api"))
        stopped = await h.wait(run.id, {"cancelled"})
        assert "stopped at the budget by owner: enough" in (stopped.error or "")
        unread = await h.store.list_items(box=Box.UNREAD, run_id=run.id)
        assert unread and unread[0].title == "test was cancelled"


async def test_the_token_budget_pauses_the_run_and_stopping_ends_it(tmp_path: Path) -> None:
    async with InProcess(tmp_path, keep_looking, skill={"budget": {"tokens": 150}}) as h:
        run = await h.runs.start("test", "find Ann", by=Principal.owner("api"))
        item = await _budget_item(h, run.id)
        assert "token budget reached" in item.body and item.args == {"tokens": 150}
        usage = (await h.store.get_run(run.id)).usage
        assert usage.tokens >= 150
        await h.inbox.decide(item.id, Reject(), by=Principal.owner("api"))
        await h.wait(run.id, {"cancelled"})


async def test_server_defaults_apply_where_a_skill_sets_no_budget(tmp_path: Path) -> None:
    async with InProcess(tmp_path, keep_looking, default_budget=Budget(steps=2)) as h:
        run = await h.runs.start("test", "find Ann", by=Principal.owner("api"))
        item = await _budget_item(h, run.id)
        assert "2 of 2" in item.body


async def test_the_daily_budget_counts_every_run_of_the_skill(tmp_path: Path) -> None:
    def one_call(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Reply:
        if last_tool_result(messages) is None:
            return Reply(tool_calls=[ToolCall("crm__lookup", {"query": "Ann"})])
        return Reply(text="done")

    async with InProcess(tmp_path, one_call, skill={"budget": {"per_day": {"tokens": 200}}}) as h:
        finished = 0
        for _ in range(10):
            run = await h.runs.start("test", "x", by=Principal.owner("api"))
            done = await h.wait(run.id, {"done", "waiting"})
            if done.status == "waiting":
                break
            finished += 1
        assert 0 < finished < 10
        (item,) = await h.store.list_items(box=Box.ACTION, status=ItemStatus.PENDING)
        assert "daily token budget of skill test reached" in item.body


async def test_a_run_exports_one_trace_with_model_and_tool_spans(tmp_path: Path) -> None:
    def two_steps(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Reply:
        if last_tool_result(messages) is None:
            return Reply(tool_calls=[ToolCall("crm__lookup", {"query": "Ann"})])
        return Reply(text="found")

    async with InProcess(tmp_path, two_steps) as h:
        exporter = InMemorySpanExporter()
        tp = TracerProvider()
        tp.add_span_processor(SimpleSpanProcessor(exporter))
        tracer = tp.get_tracer("test")

        async def on_end(run_id: str) -> None:
            export_run(tracer, await h.store.get_run(run_id), await h.store.events(run_id))

        h.ctx.on_run_end = on_end
        run = await h.runs.start("test", "find Ann", by=Principal.owner("api"))
        await h.wait(run.id, {"done"})

        def exported() -> tuple[ReadableSpan, ...] | None:
            spans = exporter.get_finished_spans()
            return spans if any(s.name == "run test" for s in spans) else None

        # The export follows the end of the run.
        spans = await eventually(exported, what=f"the trace of run {run.id} to be exported")
        root = next(s for s in spans if s.name == "run test")
        assert root.parent is None and root.attributes["pizzabot.run.id"] == run.id
        children = [s for s in spans if s is not root]
        assert {s.context.trace_id for s in spans} == {root.context.trace_id}
        assert all(
            s.parent is not None and s.parent.span_id == root.context.span_id for s in children
        )
        models = [s for s in children if s.name.startswith("model ")]
        tools = [s for s in children if s.name.startswith("tool ")]
        assert len(models) == 2 and len(tools) == 1
        assert all(s.attributes["gen_ai.usage.input_tokens"] > 0 for s in models)
        assert tools[0].attributes["pizzabot.tool"] == "crm.lookup"
        assert tools[0].attributes["pizzabot.tool.arg_names"] == ("query",)
        assert root.attributes["gen_ai.usage.output_tokens"] == sum(
            s.attributes["gen_ai.usage.output_tokens"] for s in models
        )
        assert tools[0].start_time >= models[0].end_time
