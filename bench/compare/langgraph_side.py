"""The LangGraph side of `pizzabot bench --compare langgraph`: one part of the workload, in a
fresh process of the bench's LangGraph virtualenv (`bench.compare.lgvenv`).

Run as a script by that virtualenv's Python (`python langgraph_side.py CONFIG_JSON`); it imports
nothing of Pizza Bot. The setup is what a LangGraph user builds for the same job: a
`StateGraph` over `MessagesState` with a model node (`ChatOpenAI` bound to the tool, against the
bench's scripted model server) and a tool node that calls `interrupt()` before the tool when the
run must wait on a decision, checkpointed by `AsyncSqliteSaver` on a file with its defaults. The
tool is the bench's MCP tool server (`python -m bench.tools`, the same program Pizza Bot's
side runs) reached through `langchain-mcp-adapters` over one persistent stdio session.

It prints one JSON line with its figures last on stdout. The `steps` part also prints
`{"phase": "cpu"}` before the runs whose CPU time the bench reads from outside, and waits for a
line on stdin before and after them.
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import sys
import time
from collections import defaultdict
from types import SimpleNamespace
from typing import Any

#: Model calls per run in the step figures: four tool steps, then the answer.
STEP_RUN_CALLS = 5

MODEL_MS: defaultdict[str, float] = defaultdict(float)
TOOL_MS: defaultdict[str, float] = defaultdict(float)
#: The tool body's own clock (time.time()) for a run's last call.
BODY_AT: dict[str, float] = {}


def _imports() -> SimpleNamespace:
    """LangGraph and its parts, imported when the part starts (the start part times them)."""
    began = time.perf_counter()
    from langchain_openai import ChatOpenAI

    model_import_s = time.perf_counter() - began
    from langchain_core.messages import HumanMessage
    from langchain_mcp_adapters.tools import load_mcp_tools
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
    from langgraph.config import get_config
    from langgraph.graph import END, START, MessagesState, StateGraph
    from langgraph.types import Command, interrupt
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    return SimpleNamespace(
        ChatOpenAI=ChatOpenAI,
        HumanMessage=HumanMessage,
        load_mcp_tools=load_mcp_tools,
        AsyncSqliteSaver=AsyncSqliteSaver,
        get_config=get_config,
        END=END,
        START=START,
        MessagesState=MessagesState,
        StateGraph=StateGraph,
        Command=Command,
        interrupt=interrupt,
        ClientSession=ClientSession,
        StdioServerParameters=StdioServerParameters,
        stdio_client=stdio_client,
        model_import_s=model_import_s,
        import_s=time.perf_counter() - began,
    )


def rss_mib(field: str = "VmRSS") -> float:
    """This process's resident memory (VmHWM: its peak), from /proc."""
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"{field} not in /proc/self/status")


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * p // 100))
    return ordered[int(rank) - 1]


def _text(content: Any) -> str:
    """A tool message's text, whether the adapter gave a string or content blocks."""
    if isinstance(content, str):
        return content
    return "".join(b.get("text", "") if isinstance(b, dict) else str(b) for b in content)


def build_graph(lg: SimpleNamespace, llm: Any, tools: list[Any], saver: Any) -> Any:
    bound = llm.bind_tools(tools)
    by_name = {t.name: t for t in tools}

    async def model_node(state: dict[str, Any]) -> dict[str, Any]:
        thread = lg.get_config()["configurable"]["thread_id"]
        began = time.perf_counter()
        reply = await bound.ainvoke(state["messages"])
        MODEL_MS[thread] += (time.perf_counter() - began) * 1000
        return {"messages": [reply]}

    async def tool_node(state: dict[str, Any]) -> dict[str, Any]:
        config = lg.get_config()
        thread = config["configurable"]["thread_id"]
        out = []
        for call in state["messages"][-1].tool_calls:
            if config["configurable"].get("ask"):
                lg.interrupt({"tool": call["name"], "args": call["args"]})
            began = time.perf_counter()
            message = await by_name[call["name"]].ainvoke({**call, "type": "tool_call"})
            TOOL_MS[thread] += (time.perf_counter() - began) * 1000
            BODY_AT[thread] = json.loads(_text(message.content))["t"]
            out.append(message)
        return {"messages": out}

    def route(state: dict[str, Any]) -> str:
        return "tools" if state["messages"][-1].tool_calls else lg.END

    graph = lg.StateGraph(lg.MessagesState)
    graph.add_node("model", model_node)
    graph.add_node("tools", tool_node)
    graph.add_edge(lg.START, "model")
    graph.add_conditional_edges("model", route, ["tools", lg.END])
    graph.add_edge("tools", "model")
    return graph.compile(checkpointer=saver)


class Bench:
    """The graph, its model client, the MCP session and the checkpointer, for one part."""

    def __init__(self, lg: SimpleNamespace, graph: Any) -> None:
        self.lg = lg
        self.graph = graph

    async def run(self, thread: str, text: str, *, ask: bool = False) -> dict[str, Any]:
        config = {"configurable": {"thread_id": thread, "ask": ask}}
        result: dict[str, Any] = await self.graph.ainvoke(
            {"messages": [self.lg.HumanMessage(text)]}, config
        )
        return result

    async def resume(self, thread: str) -> dict[str, Any]:
        config = {"configurable": {"thread_id": thread, "ask": True}}
        result: dict[str, Any] = await self.graph.ainvoke(
            self.lg.Command(resume={"decision": "approve"}), config
        )
        return result


async def _with_bench(config: dict[str, Any], part: Any) -> dict[str, Any]:
    lg = _imports()
    command = config["tools_command"]
    params = lg.StdioServerParameters(
        command=command[0], args=command[1:], cwd=config["tools_cwd"], env=dict(os.environ)
    )
    llm = lg.ChatOpenAI(
        model="bench", base_url=config["model_base"], api_key="bench", max_retries=0, timeout=120
    )
    async with (
        lg.stdio_client(params) as (read, write),
        lg.ClientSession(read, write) as session,
        lg.AsyncSqliteSaver.from_conn_string(config["db"]) as saver,
    ):
        await session.initialize()
        tools = await lg.load_mcp_tools(session)
        await saver.setup()
        bench = Bench(lg, build_graph(lg, llm, tools, saver))
        result: dict[str, Any] = await part(bench, config)
        return result


async def _gather_limited(coros: list[Any], limit: int) -> list[Any]:
    gate = asyncio.Semaphore(limit)

    async def one(coro: Any) -> Any:
        async with gate:
            return await coro

    return await asyncio.gather(*(one(c) for c in coros))


# -- the parts ---------------------------------------------------------------------------


def _ack(phase: str) -> None:
    print(json.dumps({"phase": phase}), flush=True)
    sys.stdin.readline()


async def part_steps(bench: Bench, config: dict[str, Any]) -> dict[str, Any]:
    await bench.run("warm", "bench warm 2")
    wall = model = tool = 0.0
    steps = calls = 0
    for k in range(max(1, config["steps"] // STEP_RUN_CALLS)):
        thread = f"s{k}"
        began = time.perf_counter()
        await bench.run(thread, f"bench {thread} {STEP_RUN_CALLS - 1}")
        wall += (time.perf_counter() - began) * 1000
        model += MODEL_MS[thread]
        tool += TOOL_MS[thread]
        steps += STEP_RUN_CALLS
        calls += STEP_RUN_CALLS - 1
    _ack("cpu")
    for k in range(config["cpu_runs"]):
        await bench.run(f"c{k}", f"bench c{k} 1")
    _ack("cpu-done")
    return {
        "steps": steps,
        "step_ms": wall / steps,
        "overhead_ms": (wall - model - tool) / steps,
        "model_ms": model / steps,
        "tool_ms": tool / calls,
        "cpu_runs": config["cpu_runs"],
    }


async def part_decisions(bench: Bench, config: dict[str, Any]) -> dict[str, Any]:
    await bench.run("warm", "bench warm 1")
    total = config["waiting"] + config["samples"]
    threads = [f"d{k}" for k in range(total)]
    results = await _gather_limited([bench.run(t, f"bench {t} 1", ask=True) for t in threads], 8)
    if not all("__interrupt__" in r for r in results):
        raise RuntimeError("a run did not stop at its interrupt")
    to_body = []
    for thread in threads[: config["samples"]]:
        began = time.time()
        await bench.resume(thread)
        to_body.append((BODY_AT[thread] - began) * 1000)
    return {
        "samples": len(to_body),
        "waiting": total - len(to_body),
        "p50_ms": percentile(to_body, 50),
        "p99_ms": percentile(to_body, 99),
        "max_ms": max(to_body),
    }


async def part_memory(bench: Bench, config: dict[str, Any]) -> dict[str, Any]:
    runs, batch = config["memory_runs"], config["batch"]

    async def wait_batch(first: int, n: int) -> None:
        names = [f"m{k}" for k in range(first, first + n)]
        await _gather_limited([bench.run(t, f"bench {t} 1", ask=True) for t in names], 8)
        for t in names:  # what the bench itself noted per run is not the graph's memory
            MODEL_MS.pop(t, None)

    await wait_batch(-batch, batch)  # the warm-up: one batch of the same size
    gc.collect()
    before = rss_mib()
    made = 0
    while made < runs:
        n = min(batch, runs - made)
        await wait_batch(made, n)
        made += n
    gc.collect()
    after = rss_mib()
    return {
        "waiting": runs,
        "batch": batch,
        "rss_before_mib": before,
        "rss_after_mib": after,
        "delta_mib": after - before,
        "per_10000_mib": (after - before) * 10_000 / runs,
    }


async def part_inflight(bench: Bench, config: dict[str, Any]) -> dict[str, Any]:
    n, delay = config["inflight"], config["delay_ms"]
    await bench.run("warm", "bench warm 1")
    spans: dict[str, tuple[float, float]] = {}

    async def one(thread: str) -> None:
        began = time.perf_counter()
        await bench.run(thread, f"bench {thread} 1 {delay}")
        spans[thread] = (began, time.perf_counter())

    await asyncio.gather(*(one(f"i{k}") for k in range(n)))
    walls = {t: (b - a) * 1000 for t, (a, b) in spans.items()}
    overhead = [w - MODEL_MS[t] - TOOL_MS[t] for t, w in walls.items()]
    first = min(a for a, _ in spans.values())
    last = max(b for _, b in spans.values())
    return {
        "runs": n,
        "runs_per_s": n / (last - first),
        "wall_p50_s": percentile(list(walls.values()), 50) / 1000,
        "wall_p99_s": percentile(list(walls.values()), 99) / 1000,
        "overhead_p99_ms": percentile(overhead, 99),
        "peak_rss_mib": rss_mib("VmHWM"),
    }


async def part_start(bench: Bench, config: dict[str, Any]) -> dict[str, Any]:
    rss = rss_mib()
    await bench.run("first", "bench first 1")
    # The bench's clock stops at this line, not at the process's end (closing takes a while).
    print(json.dumps({"phase": "first-run-done"}), flush=True)
    return {
        "rss_before_run_mib": rss,
        "model_import_s": bench.lg.model_import_s,
        "import_s": bench.lg.import_s,
    }


PARTS = {
    "steps": part_steps,
    "decisions": part_decisions,
    "memory": part_memory,
    "inflight": part_inflight,
    "start": part_start,
}


def main() -> None:
    config = json.loads(sys.argv[1])
    began = time.perf_counter()
    result = asyncio.run(_with_bench(config, PARTS[config["part"]]))
    result["process_s"] = time.perf_counter() - began
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
