"""How a request reads as an MCP task (`pizzabot.client.mcp.tasks`): which status each
request state is, what a completed task carries, that a task id names its request only for
the token that made it, and what a withdrawn request's cards say."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from mcp.shared.exceptions import MCPError

from pizzabot.client.mcp.tasks import request_id_of, task_id_of, task_of
from pizzabot.client.wire import RequestState

ASKED = datetime(2026, 7, 28, 9, 0, tzinfo=UTC)
DECIDED = datetime(2026, 7, 28, 9, 30, tzinfo=UTC)
TOKEN = b"Bearer agent-token"


def _state(status: str, **more: Any) -> RequestState:
    fields: dict[str, Any] = {
        "id": "3f2a9c1e7b6d4a50",
        "item_id": "i1",
        "kind": "approval",
        "status": status,
        "url": "http://127.0.0.1:8787/items/i1",
        "created_at": ASKED,
        **more,
    }
    return RequestState.model_validate(fields)


def test_a_pending_request_is_a_working_task_that_names_its_card() -> None:
    task = task_of(_state("pending"), binding=TOKEN, poll_ms=5000)
    assert task["status"] == "working" and task["statusMessage"].endswith("/items/i1")
    assert task["createdAt"] == task["lastUpdatedAt"] == "2026-07-28T09:00:00Z"
    assert (task["ttlMs"], task["pollIntervalMs"]) == (None, 5000)
    assert "result" not in task


def test_the_kill_switch_keeps_a_task_working_and_says_why() -> None:
    halted = _state("halted", reason="the kill switch is on (incident)")
    task = task_of(halted, binding=TOKEN, poll_ms=5000)
    assert (task["status"], task["statusMessage"]) == ("working", halted.reason)


def test_a_decision_completes_the_task_with_the_tools_own_result() -> None:
    edited = _state("edited", args={"n": 2}, decided_by="carol", via="slack", decided_at=DECIDED)
    task = task_of(edited, binding=TOKEN, poll_ms=5000)
    out = task["result"]["structuredContent"]
    assert task["status"] == "completed" and task["lastUpdatedAt"] == "2026-07-28T09:30:00Z"
    assert (out["status"], out["approved"], out["args"]) == ("edited", True, {"n": 2})
    assert "Edited and approved by carol" in task["result"]["content"][0]["text"]


def test_a_question_completes_with_ask_humans_result() -> None:
    answered = _state("answered", kind="question", args={"answer": "eu"}, decided_at=DECIDED)
    out = task_of(answered, binding=TOKEN, poll_ms=1)["result"]["structuredContent"]
    assert (out["action"], out["content"]) == ("accept", {"answer": "eu"})


def test_expiry_completes_the_task_but_a_withdrawal_cancels_it() -> None:
    expired = _state("expired", reason="no one answered within 1h", decided_by="timeout")
    withdrawn = _state("expired", reason="withdrawn by token:agent", decided_by="token:agent")
    ended = _state("expired", decided_by="the run ended")
    assert task_of(expired, binding=TOKEN, poll_ms=1)["status"] == "completed"
    assert task_of(withdrawn, binding=TOKEN, poll_ms=1)["status"] == "cancelled"
    assert task_of(ended, binding=TOKEN, poll_ms=1)["status"] == "cancelled"


def test_a_task_id_names_its_request_only_for_the_token_that_made_it() -> None:
    task_id = task_id_of(TOKEN, "3f2a9c1e7b6d4a50")
    assert request_id_of(TOKEN, task_id) == "3f2a9c1e7b6d4a50"
    assert len(task_id.rpartition(".")[2]) == 32  # 128 bits of MAC
    for token, forged in [
        (b"Bearer other-token", task_id),
        (b"", task_id),
        (TOKEN, "3f2a9c1e7b6d4a50"),
        (TOKEN, "3f2a9c1e7b6d4a50." + "0" * 32),
        (TOKEN, "." + task_id.rpartition(".")[2]),
    ]:
        with pytest.raises(MCPError) as refused:
            request_id_of(token, forged)
        assert refused.value.error.code == -32602


def test_a_withdrawn_requests_cards_say_who_withdrew_it() -> None:
    from pizzabot.agent.model import Box, Item, ItemKind, ItemStatus
    from pizzabot.channels.chat.card import decided_line
    from pizzabot.channels.email.compose import outcome_text
    from pizzabot.channels.slack.cards import decided_text

    closed = Item(
        id="i1",
        run_id="r1",
        skill="inbox",
        box=Box.ACTION,
        kind=ItemKind.TOOL,
        status=ItemStatus.CANCELLED,
        title="Drop table",
        body="",
        created_at=ASKED,
        tool="shell",
        args={},
        decided_at=DECIDED,
        reason="withdrawn by token:agent",
    )
    for line in (decided_text(closed), decided_line(closed), outcome_text(closed)):
        assert "Closed" in line and "(withdrawn by token:agent)" in line
