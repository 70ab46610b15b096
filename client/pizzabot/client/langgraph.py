"""LangGraph's human-in-the-loop step, decided in Pizza Bot (the `langgraph` extra).

`langchain.agents.middleware.HumanInTheLoopMiddleware` pauses a graph with an interrupt per
model turn (`HITLRequest`: action requests + review configs) or, with
`interrupt_mode="per_call"`, one per tool call (`ToolApprovalRequest`). Each action becomes a
request; the decisions come back as the resume value the graph expects, keyed by interrupt:

    result = await graph.ainvoke(inputs, config, version="v2")
    while result.interrupts:
        resume = await decide_interrupts(inbox, "crm", result.interrupts)
        result = await graph.ainvoke(Command(resume=resume), config, version="v2")

approved -> `{"type": "approve"}`; edited -> `{"type": "edit", "edited_action": {name, args}}`;
rejected -> `{"type": "reject", "message": the reason}`; expired (or still pending after
`timeout`) -> a reject saying no one decided. A decision the review config does not allow
for that tool becomes the nearest one it does: an edit where only approve and reject are
allowed is a reject whose message carries the new arguments, so the model can ask again
with them.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.types import Interrupt

from pizzabot.client._async import AsyncInbox
from pizzabot.client.wire import RequestState

__all__ = ["decide_interrupts", "hitl_decision", "tool_schemas"]

_ALL = ("approve", "edit", "reject", "respond")


def _reject(message: str, allowed: Iterable[str], name: str) -> dict[str, Any]:
    if "reject" not in allowed:
        raise ValueError(
            f"the person refused the call to {name}, but its review config does not allow "
            f"reject (allowed: {', '.join(allowed)})"
        )
    return {"type": "reject", "message": message}


def hitl_decision(
    decision: RequestState, name: str, allowed: Iterable[str] = _ALL
) -> dict[str, Any]:
    """The HITL decision (`ApproveDecision` | `EditDecision` | `RejectDecision`) a decided
    request stands for, within the decisions the tool's review config `allowed`."""
    allowed = tuple(allowed)
    if decision.edited and decision.args is not None:
        if "edit" in allowed:
            return {"type": "edit", "edited_action": {"name": name, "args": dict(decision.args)}}
        return _reject(
            "The reviewer did not approve these arguments; they would approve the call with "
            f"these instead: {json.dumps(decision.args, ensure_ascii=False)}",
            allowed,
            name,
        )
    if decision.approved:
        if "approve" not in allowed:
            raise ValueError(f"the call to {name} was approved, but its review allows no approve")
        return {"type": "approve"}
    if decision.status == "rejected":
        who = f" by {decision.decided_by}" if decision.decided_by else ""
        return _reject(f"Rejected{who}: {decision.reason or 'no reason given'}", allowed, name)
    return _reject("No one approved the call in time; it was not run.", allowed, name)


def tool_schemas(tools: Iterable[BaseTool]) -> dict[str, dict[str, Any]]:
    """Each tool's argument schema by name, as the model sees it: pass it as `schemas` so a
    batched interrupt's cards get edit forms (a per-call interrupt carries its own)."""
    return {
        t.name: dict(convert_to_openai_tool(t)["function"].get("parameters") or {}) for t in tools
    }


def _edit_schema(response_schema: Any) -> dict[str, Any] | None:
    """The tool's argument schema inside a per-call interrupt's decision schema (the edit
    branch's `edited_action.args`), when it is a plain object schema."""
    if not isinstance(response_schema, dict):
        return None
    branches = response_schema.get("oneOf") or response_schema.get("anyOf") or [response_schema]
    defs = response_schema.get("$defs") or {}
    for branch in branches:
        branch = _deref(branch, defs)
        props = branch.get("properties") or {}
        if (props.get("type") or {}).get("const") != "edit":
            continue
        action = _deref(props.get("edited_action") or {}, defs)
        args = _deref((action.get("properties") or {}).get("args") or {}, defs)
        if args.get("type") == "object" and "$ref" not in json.dumps(args):
            return args
    return None


def _deref(node: Any, defs: Mapping[str, Any]) -> dict[str, Any]:
    if not isinstance(node, dict):
        return {}
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        found = defs.get(ref.removeprefix("#/$defs/"))
        return found if isinstance(found, dict) else {}
    return node


@dataclass(frozen=True)
class _Action:
    """One action of one interrupt, and what its answer may be."""

    name: str
    args: dict[str, Any]
    description: str | None
    allowed: tuple[str, ...]


def _actions(interrupt: Interrupt) -> tuple[list[_Action], bool]:
    """The actions an interrupt asks about, and whether it is a per-call one."""
    value = interrupt.value
    if isinstance(value, dict) and value.get("type") == "tool_approval":
        allowed = _allowed_from_schema(interrupt.response_schema)
        return [
            _Action(value["name"], dict(value["args"]), value.get("description"), allowed)
        ], True
    if isinstance(value, dict) and "action_requests" in value:
        configs = {c["action_name"]: c for c in value.get("review_configs") or []}
        actions = [
            _Action(
                a["name"],
                dict(a["args"]),
                a.get("description"),
                tuple(configs.get(a["name"], {}).get("allowed_decisions") or _ALL),
            )
            for a in value["action_requests"]
        ]
        return actions, False
    raise ValueError(f"interrupt {interrupt.id} is not a human-in-the-loop request: {value!r}")


def _allowed_from_schema(schema: Any) -> tuple[str, ...]:
    if not isinstance(schema, dict):
        return _ALL
    defs = schema.get("$defs") or {}
    found = []
    for branch in schema.get("oneOf") or schema.get("anyOf") or [schema]:
        kind = (_deref(branch, defs).get("properties") or {}).get("type") or {}
        if isinstance(kind.get("const"), str):
            found.append(kind["const"])
    return tuple(found) or _ALL


async def decide_interrupts(
    inbox: AsyncInbox,
    skill: str,
    interrupts: Iterable[Interrupt],
    *,
    schemas: Mapping[str, Mapping[str, Any]] | None = None,
    timeout: float | None = None,
    key_prefix: str | None = None,
) -> dict[str, Any]:
    """Ask about every action of every interrupt at once; return `Command(resume=...)`'s
    value: `{interrupt id: HITLResponse}` (batched) or `{interrupt id: decision}` (per call).

    `schemas` gives a tool's argument schema (its edit form) by tool name; a per-call
    interrupt carries its own. `key_prefix` (unique to this thread, e.g. its thread_id) makes
    the requests' keys stable, so asking again after a restart finds the same items.
    """
    asked: list[tuple[Interrupt, list[_Action], bool]] = [(i, *_actions(i)) for i in interrupts]

    async def one(interrupt: Interrupt, n: int, action: _Action) -> RequestState:
        schema = (schemas or {}).get(action.name) or _edit_schema(interrupt.response_schema)
        return await inbox.ask(
            skill,
            tool=action.name,
            args=action.args,
            title=action.name,
            schema=schema,
            description=action.description,
            timeout=timeout,
            idempotency_key=f"{key_prefix}:{interrupt.id}:{n}" if key_prefix else None,
        )

    decisions = await asyncio.gather(
        *(one(i, n, a) for i, actions, _ in asked for n, a in enumerate(actions))
    )
    answers = iter(decisions)
    resume: dict[str, Any] = {}
    for interrupt, actions, per_call in asked:
        made = [hitl_decision(next(answers), a.name, a.allowed) for a in actions]
        resume[interrupt.id] = made[0] if per_call else {"decisions": made}
    return resume
