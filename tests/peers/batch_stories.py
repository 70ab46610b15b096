"""What the approve-all stories share: a scripted model that asks for three calls in one
reply (two mails and a `crm.lookup`), then reports how many results it got; and the skill
that makes the lookup need two people's approval, so an "approve all" leaves it out.

    async with Stack(tmp_path, script=three_at_once, skill=TWO_FOR_LOOKUP) as st: ...
"""

from __future__ import annotations

from typing import Any

from pizzabot.agent.testing.scripts import Message, Reply, ToolCall

#: The three calls of the turn, in the model's order.
TURN = [
    ToolCall("crm__send_email", {"to": "a@x.example", "subject": "one", "body": "Hello"}),
    ToolCall("crm__send_email", {"to": "b@x.example", "subject": "two", "body": "Hello"}),
    ToolCall("crm__lookup", {"query": "Ada"}),
]

#: The lookup asks, and needs two different people: approve all leaves it out.
TWO_FOR_LOOKUP: dict[str, Any] = {
    "tools": {
        "crm.send_email": "ask",
        "crm.lookup": {"policy": "ask", "approvals": {"required": 2}},
    },
}


def three_at_once(messages: list[Message], tools: list[dict[str, Any]]) -> Reply:
    """Three calls in one reply; once all have results, a final answer naming them."""
    done = [m for m in messages if m.get("role") == "tool"]
    if not done:
        return Reply(tool_calls=list(TURN))
    return Reply(text=f"got {len(done)} results")


def pending_of(items: list[dict[str, Any]], run_id: str) -> list[dict[str, Any]]:
    return [i for i in items if i["run_id"] == run_id and i["status"] == "pending"]
