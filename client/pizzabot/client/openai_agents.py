"""The OpenAI Agents SDK's tool approvals, decided in Pizza Bot (the `openai-agents` extra).

A tool with `needs_approval` interrupts the run; each interruption becomes a request, and the
decisions are applied to the run's state, which the next run resumes from:

    result = await Runner.run(agent, prompt)
    while result.interruptions:
        state = await decide_interruptions(inbox, "crm", result)
        result = await Runner.run(agent, state)

approved -> `state.approve(item)`; rejected -> `state.reject(item, rejection_message=the
reason)`; expired (or still pending after `timeout`) -> a reject saying no one decided.

The SDK has no edit: it runs a call as the model made it or not at all. An edit in Pizza Bot
therefore becomes a reject whose message gives the model the person's arguments, so it can
call the tool again with them (and that call is asked about again).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Any

from agents import FunctionTool, RunResult, RunResultStreaming, RunState
from agents.items import ToolApprovalItem

from pizzabot.client._async import AsyncInbox
from pizzabot.client.wire import RequestState

__all__ = ["apply_decision", "decide_interruptions"]


def apply_decision(
    state: RunState[Any, Any], item: ToolApprovalItem, decision: RequestState
) -> None:
    """Approve or reject `item` on `state` as the decided request says."""
    if decision.edited and decision.args is not None:
        state.reject(
            item,
            rejection_message=(
                "A person did not approve these arguments but would approve the same call with "
                f"these: {json.dumps(decision.args, ensure_ascii=False)}. Call the tool again "
                "with exactly them if you still want to."
            ),
        )
    elif decision.approved:
        state.approve(item)
    elif decision.status == "rejected":
        who = f" by {decision.decided_by}" if decision.decided_by else ""
        state.reject(
            item,
            rejection_message=f"The call was rejected{who}: {decision.reason or 'no reason given'}",
        )
    else:
        state.reject(item, rejection_message="No one approved the call in time; it was not run.")


def _schema(item: ToolApprovalItem) -> dict[str, Any] | None:
    """The function tool's own parameter schema, for the card's edit form."""
    for tool in getattr(item.agent, "tools", None) or []:
        if isinstance(tool, FunctionTool) and tool.name == item.tool_name:
            return dict(tool.params_json_schema)
    return None


def _args(item: ToolApprovalItem) -> dict[str, Any]:
    raw = item.arguments
    try:
        value = json.loads(raw) if raw else {}
    except ValueError:
        return {"arguments": raw}
    return value if isinstance(value, dict) else {"arguments": value}


async def decide_interruptions(
    inbox: AsyncInbox,
    skill: str,
    run: RunResult | RunResultStreaming | RunState[Any, Any],
    *,
    schemas: Mapping[str, Mapping[str, Any]] | None = None,
    timeout: float | None = None,
    key_prefix: str | None = None,
) -> RunState[Any, Any]:
    """Ask about every interruption of `run` at once; return its state with each approved or
    rejected, ready for `Runner.run(agent, state)`.

    A function tool's parameter schema is offered as the edit form unless `schemas` names
    another. `key_prefix` (unique to this run) makes the requests' keys stable, so asking
    again after a restart finds the same items.
    """
    if isinstance(run, RunState):
        state, items = run, run.get_interruptions()
    else:
        state, items = run.to_state(), list(run.interruptions)

    async def one(item: ToolApprovalItem) -> RequestState:
        name = item.qualified_name or item.tool_name or "tool"
        return await inbox.ask(
            skill,
            tool=name,
            args=_args(item),
            title=name,
            schema=(schemas or {}).get(name) or _schema(item),
            timeout=timeout,
            idempotency_key=f"{key_prefix}:{item.call_id}" if key_prefix else None,
        )

    decisions = await asyncio.gather(*(one(i) for i in items))
    for item, decision in zip(items, decisions, strict=True):
        apply_decision(state, item, decision)
    return state
