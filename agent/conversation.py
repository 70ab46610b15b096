"""Rebuild a run's state and the model's conversation from its event log.

The event log is the durable state: nothing about a run lives in memory between steps. This
module reads the log and answers what the engine needs to know next — which tool calls have
no result, what was decided, which call was interrupted by a crash — and builds the messages
the model sees, with an edited call shown as the call that was made.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from agent.model import EVENT_SCHEMA_VERSION, Event, EventKind, Usage


class UnknownEventVersion(Exception):
    pass


@dataclass
class CallState:
    id: str
    wire_name: str
    args: dict[str, Any]
    item_ids: list[str] = field(default_factory=list)
    decision: dict[str, Any] | None = None  # the decision event of the latest item
    started: bool = False  # a TOOL_STARTED after the latest decision
    result: dict[str, Any] | None = None


@dataclass
class RunState:
    calls: dict[str, CallState] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)
    budget_item: str | None = None
    budget_decision: dict[str, Any] | None = None
    last_assistant_text: str | None = None
    usage: Usage = field(default_factory=Usage)
    finished: bool = False
    wall_started: Any = None

    def pending(self) -> list[CallState]:
        return [self.calls[c] for c in self.order if self.calls[c].result is None]


def derive(events: list[Event]) -> RunState:
    state = RunState()
    tokens = 0
    cost = 0.0
    cost_known = True
    steps = 0
    by_item: dict[str, str] = {}
    for ev in events:
        if ev.version > EVENT_SCHEMA_VERSION:
            raise UnknownEventVersion(
                f"event {ev.seq} of run {ev.run_id} has schema version {ev.version}"
            )
        d = ev.data
        match ev.kind:
            case EventKind.RUN_STARTED:
                state.wall_started = ev.at
                state.finished = False
            case EventKind.USER_MESSAGE:
                state.finished = False
            case EventKind.MODEL_CALL:
                steps += 1
                tokens += int(d.get("tokens_in", 0)) + int(d.get("tokens_out", 0))
                if d.get("cost_usd") is None:
                    cost_known = False
                else:
                    cost += float(d["cost_usd"])
            case EventKind.ASSISTANT_MESSAGE:
                state.last_assistant_text = d.get("text") or state.last_assistant_text
                for tc in d.get("tool_calls", []):
                    state.calls[tc["id"]] = CallState(tc["id"], tc["name"], dict(tc["arguments"]))
                    state.order.append(tc["id"])
            case EventKind.TOOL_REQUEST:
                call = state.calls.get(d["call_id"])
                if call is not None:
                    call.item_ids.append(d["item_id"])
                    call.decision = None
                    call.started = False
                by_item[d["item_id"]] = d["call_id"]
            case EventKind.DECISION:
                if d.get("item_id") == state.budget_item:
                    state.budget_decision = d
                    continue
                call = state.calls.get(d.get("call_id", ""))
                if call is not None and call.item_ids and call.item_ids[-1] == d.get("item_id"):
                    call.decision = d
            case EventKind.TOOL_STARTED:
                call = state.calls.get(d["call_id"])
                if call is not None:
                    call.started = True
            case EventKind.TOOL_RESULT:
                call = state.calls.get(d["call_id"])
                if call is not None:
                    call.result = d
            case EventKind.TOOL_INTERRUPTED:
                call = state.calls.get(d["call_id"])
                if call is not None:
                    call.started = False
            case EventKind.BUDGET_REACHED:
                state.budget_item = d["item_id"]
                state.budget_decision = None
            case EventKind.BUDGET_EXTENDED:
                state.budget_item = None
                state.budget_decision = None
            case EventKind.RUN_FINISHED:
                state.finished = True
            case EventKind.ERROR | EventKind.NOTE:
                pass
    state.usage = Usage(tokens=tokens, cost_usd=round(cost, 6), steps=steps, cost_known=cost_known)
    return state


def final_args(call: CallState) -> dict[str, Any]:
    """The arguments the call runs with: the edited ones when a human edited it."""
    if call.decision and call.decision.get("decision") == "edit":
        return dict(call.decision["args"])
    return call.args


def messages(instructions: str, events: list[Event], state: RunState) -> list[dict[str, Any]]:
    """The conversation for the model. An edited call appears with its edited arguments, so
    the model sees the call that was made and does not try the original again."""
    out: list[dict[str, Any]] = [{"role": "system", "content": instructions}]
    for ev in events:
        d = ev.data
        match ev.kind:
            case EventKind.RUN_STARTED:
                out.append({"role": "user", "content": d.get("input", "")})
            case EventKind.USER_MESSAGE:
                out.append({"role": "user", "content": d["text"]})
            case EventKind.ASSISTANT_MESSAGE:
                msg: dict[str, Any] = {"role": "assistant", "content": d.get("text")}
                calls = d.get("tool_calls", [])
                if calls:
                    msg["tool_calls"] = [
                        {
                            "id": tc["id"],
                            "type": "function",
                            "function": {
                                "name": tc["name"],
                                "arguments": json.dumps(final_args(state.calls[tc["id"]])),
                            },
                        }
                        for tc in calls
                    ]
                out.append(msg)
            case EventKind.TOOL_RESULT:
                out.append(
                    {"role": "tool", "tool_call_id": d["call_id"], "content": d.get("text", "")}
                )
            case _:
                pass
    return out
