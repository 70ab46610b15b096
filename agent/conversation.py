"""Rebuild a run's state and the model's conversation from its event log.

The event log is the durable state: nothing about a run lives in memory between steps. This
module reads the log and answers what the engine needs to know next — which tool calls have
no result, what was decided, which call was interrupted by a crash, whether the model's final
answer is already recorded — and builds the messages the model sees, with an edited call
shown as the call that was made.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, assert_never

from pizzabot.agent.events import (
    AssistantMessage,
    BudgetExtended,
    BudgetReached,
    DecisionMade,
    ErrorNoted,
    Event,
    ModelCall,
    Note,
    RunFinished,
    RunStarted,
    ToolInterrupted,
    ToolRequest,
    ToolResult,
    ToolStarted,
    UnknownEventVersion,
    UserMessage,
)
from pizzabot.agent.model import Edit, Usage

__all__ = ["CallState", "RunState", "UnknownEventVersion", "derive", "messages"]


@dataclass
class CallState:
    id: str
    wire_name: str
    args: dict[str, Any]
    item_ids: list[str] = field(default_factory=list)
    decision: DecisionMade | None = None  # the decision on the latest item
    started: bool = False  # a TOOL_STARTED after the latest decision
    #: How many times the call was started (a crash can leave an earlier start without result).
    attempts: int = 0
    result: ToolResult | None = None

    @property
    def final_args(self) -> dict[str, Any]:
        """The arguments the call runs with: the edited ones when a human edited it."""
        if self.decision is not None and isinstance(self.decision.decision, Edit):
            return dict(self.decision.decision.args)
        return self.args


@dataclass
class RunState:
    calls: dict[str, CallState] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)
    budget_item: str | None = None
    budget_decision: DecisionMade | None = None
    last_assistant_text: str | None = None
    #: The model's final answer (no tool calls) when no later message asks for more.
    answer: str | None = None
    usage: Usage = field(default_factory=Usage)
    finished: bool = False
    wall_started: datetime | None = None

    def pending(self) -> list[CallState]:
        return [self.calls[c] for c in self.order if self.calls[c].result is None]


@dataclass
class _Tally:
    tokens: int = 0
    cost: float = 0.0
    cost_known: bool = True
    steps: int = 0

    def add(self, call: ModelCall) -> None:
        self.steps += 1
        self.tokens += call.tokens_in + call.tokens_out
        if call.cost_usd is None:
            self.cost_known = False
        else:
            self.cost += call.cost_usd

    def usage(self) -> Usage:
        return Usage(self.tokens, round(self.cost, 6), self.steps, self.cost_known)


def derive(events: list[Event]) -> RunState:
    state = RunState()
    tally = _Tally()
    for ev in events:
        _apply(state, tally, ev)
    state.usage = tally.usage()
    return state


def _apply(state: RunState, tally: _Tally, ev: Event) -> None:
    p = ev.payload
    match p:
        case RunStarted():
            state.wall_started = ev.at
            state.finished = False
        case UserMessage():
            state.finished = False
            state.answer = None
        case ModelCall():
            tally.add(p)
        case AssistantMessage():
            state.last_assistant_text = p.text or state.last_assistant_text
            state.answer = (p.text or "") if p.final else None
            for tc in p.tool_calls:
                state.calls[tc.id] = CallState(tc.id, tc.name, dict(tc.arguments))
                state.order.append(tc.id)
        case ToolRequest():
            call = state.calls.get(p.call_id)
            if call is not None:
                call.item_ids.append(p.item_id)
                call.decision = None
                call.started = False
        case DecisionMade():
            _decided(state, p)
        case ToolStarted():
            call = state.calls.get(p.call_id)
            if call is not None:
                call.started = True
                call.attempts += 1
        case ToolResult():
            call = state.calls.get(p.call_id)
            if call is not None:
                call.result = p
        case ToolInterrupted():
            call = state.calls.get(p.call_id)
            if call is not None:
                call.started = False
        case BudgetReached():
            state.budget_item = p.item_id
            state.budget_decision = None
        case BudgetExtended():
            state.budget_item = None
            state.budget_decision = None
        case RunFinished():
            state.finished = True
            state.answer = None
        case ErrorNoted() | Note():
            pass
        case _:
            assert_never(p)


def _decided(state: RunState, p: DecisionMade) -> None:
    if p.item_id == state.budget_item:
        state.budget_decision = p
        return
    call = state.calls.get(p.call_id or "")
    if call is not None and call.item_ids and call.item_ids[-1] == p.item_id:
        call.decision = p


def messages(instructions: str, events: list[Event], state: RunState) -> list[dict[str, Any]]:
    """The conversation for the model. An edited call appears with its edited arguments, so
    the model sees the call that was made and does not try the original again."""
    out: list[dict[str, Any]] = [{"role": "system", "content": instructions}]
    for ev in events:
        p = ev.payload
        match p:
            case RunStarted():
                out.append({"role": "user", "content": p.input})
            case UserMessage():
                out.append({"role": "user", "content": p.text})
            case AssistantMessage():
                out.append(_assistant(p, state))
            case ToolResult():
                out.append({"role": "tool", "tool_call_id": p.call_id, "content": p.text})
            case _:
                pass
    return out


def _assistant(p: AssistantMessage, state: RunState) -> dict[str, Any]:
    msg: dict[str, Any] = {"role": "assistant", "content": p.text}
    if p.tool_calls:
        msg["tool_calls"] = [
            {
                "id": tc.id,
                "type": "function",
                "function": {
                    "name": tc.name,
                    "arguments": json.dumps(state.calls[tc.id].final_args),
                },
            }
            for tc in p.tool_calls
        ]
    return msg
