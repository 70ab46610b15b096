"""pydantic-ai's deferred tool approvals, decided in Pizza Bot (the `pydantic-ai` extra).

An agent whose tools need approval (`requires_approval=True`, or `ApprovalRequired`) ends its
run with `DeferredToolRequests`; each call in `approvals` becomes a request, and the
decisions come back as the `DeferredToolResults` the next run takes:

    result = await agent.run(prompt, output_type=[str, DeferredToolRequests])
    if isinstance(result.output, DeferredToolRequests):
        results = await decide_deferred(inbox, "crm", result.output)
        result = await agent.run(message_history=result.all_messages(),
                                 deferred_tool_results=results)

approved -> `ToolApproved()`; edited -> `ToolApproved(override_args=the new arguments)`;
rejected -> `ToolDenied(the reason)`; expired, or still pending after `timeout` ->
`ToolDenied` saying no one decided. Calls in `calls` (external results, questions) are left
to the caller.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from pydantic_ai import DeferredToolRequests, DeferredToolResults, ToolApproved, ToolDenied
from pydantic_ai.messages import ToolCallPart

from pizzabot.client._async import AsyncInbox
from pizzabot.client._sync import Inbox
from pizzabot.client._wire import expiry_wait
from pizzabot.client.wire import RequestState

__all__ = ["decide_deferred", "decide_deferred_sync", "result_of"]


def result_of(decision: RequestState) -> ToolApproved | ToolDenied:
    """The approval result a decided request stands for."""
    if decision.edited and decision.args is not None:
        return ToolApproved(override_args=dict(decision.args))
    if decision.approved:
        return ToolApproved()
    if decision.status == "rejected":
        who = f" by {decision.decided_by}" if decision.decided_by else ""
        return ToolDenied(f"The call was rejected{who}: {decision.reason or 'no reason given'}")
    return ToolDenied("No one approved the call in time; it was not run.")


def _ask(
    part: ToolCallPart,
    schemas: Mapping[str, Mapping[str, Any]] | None,
    key_prefix: str | None,
    timeout: float | None,
) -> dict[str, Any]:
    return {
        "title": part.tool_name,
        "tool": part.tool_name,
        "args": part.args_as_dict(),
        "schema": (schemas or {}).get(part.tool_name),
        "timeout": timeout,
        "idempotency_key": f"{key_prefix}:{part.tool_call_id}" if key_prefix else None,
    }


async def decide_deferred(
    inbox: AsyncInbox,
    skill: str,
    requests: DeferredToolRequests,
    *,
    schemas: Mapping[str, Mapping[str, Any]] | None = None,
    timeout: float | None = None,
    key_prefix: str | None = None,
) -> DeferredToolResults:
    """Ask about every call in `requests.approvals` at once and wait for all the decisions.

    `schemas` gives a tool's argument schema (its edit form) by tool name. `key_prefix`
    (something unique to this run, e.g. a conversation id) makes the requests' keys stable,
    so asking again after a restart finds the same items instead of making new ones.
    """

    async def one(part: ToolCallPart) -> RequestState:
        return await inbox.ask(skill, **_ask(part, schemas, key_prefix, timeout))

    decisions = await asyncio.gather(*(one(p) for p in requests.approvals))
    return _results(requests, decisions)


def decide_deferred_sync(
    inbox: Inbox,
    skill: str,
    requests: DeferredToolRequests,
    *,
    schemas: Mapping[str, Mapping[str, Any]] | None = None,
    timeout: float | None = None,
    key_prefix: str | None = None,
) -> DeferredToolResults:
    """`decide_deferred` for `agent.run_sync`: files every request first, then waits."""
    created = [
        inbox.request(skill, **_ask(p, schemas, key_prefix, timeout)) for p in requests.approvals
    ]
    waited = expiry_wait(timeout)
    decisions = [d if not d.pending else inbox.until_decided(d.id, timeout=waited) for d in created]
    return _results(requests, decisions)


def _results(requests: DeferredToolRequests, decisions: list[RequestState]) -> DeferredToolResults:
    return requests.build_results(
        approvals={
            part.tool_call_id: result_of(d)
            for part, d in zip(requests.approvals, decisions, strict=True)
        },
        answered_by={
            part.tool_call_id: d.decided_by
            for part, d in zip(requests.approvals, decisions, strict=True)
            if d.decided_by
        },
    )
