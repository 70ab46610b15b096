"""The scripted model's part in the end-to-end stories that several test files tell: one
proposed email, asked for once, then a summary quoting what the tool said. Kept here so a
story reads the same on the API, Slack (HTTP and Socket Mode) and the CLI."""

from __future__ import annotations

from typing import Any

from pizzabot.agent.testing.scripts import last_tool_result
from tests.peers.stack import Reply, ToolCall

#: The arguments the model proposes for `crm__send_email`.
EMAIL: dict[str, Any] = {
    "to": "ann@example.com",
    "subject": "Quote",
    "body": "Here is the quote.",
    "priority": "normal",
    "copies": 1,
}


def send_then_summarise(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Reply:
    """Ask to send the email once; then report what the tool said (quoting it)."""
    result = last_tool_result(messages)
    if result is None:
        return Reply(text="I will mail Ann.", tool_calls=[ToolCall("crm__send_email", dict(EMAIL))])
    return Reply(text=f"Finished. The tool said: {result}")
