"""What a scripted model says, and helpers for writing the scripts that decide it.

A script is a plain function of the conversation so far, so the same conversation always gets
the same answer: a run that is rebuilt from its events after a restart meets the same model.
Messages reach the script in OpenAI chat shape whichever protocol carried them.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

Message = dict[str, Any]


@dataclass
class ToolCall:
    """One tool call the model makes; `id` is filled in deterministically when left None.
    `arguments` as text is sent as it is (a model that writes broken JSON)."""

    name: str
    arguments: dict[str, Any] | str
    id: str | None = None


@dataclass
class Reply:
    """One assistant turn: some text, some tool calls, or both."""

    text: str | None = None
    tool_calls: list[ToolCall] = field(default_factory=list)


Script = Callable[[list[Message], list[dict[str, Any]]], Reply | Awaitable[Reply]]


def estimate_tokens(text: str) -> int:
    """A crude, deterministic token count, so budgets can be tested with exact numbers."""
    return len(text) // 4 + 1


def message_text(message: Message) -> str:
    """The text of a message whether its content is a string or a list of parts."""
    content = message.get("content")
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return str(content)


def prompt_text(messages: Sequence[Message]) -> str:
    """Everything the model reads in a conversation, for the prompt token estimate."""
    parts: list[str] = []
    for m in messages:
        parts.append(message_text(m))
        for call in m.get("tool_calls") or []:
            function = call.get("function", {})
            parts.append(str(function.get("name", "")) + str(function.get("arguments", "")))
    return "\n".join(parts)


def reply_text(reply: Reply) -> str:
    """Everything the model writes in a reply, for the completion token estimate."""
    calls = "".join(c.name + json.dumps(c.arguments, sort_keys=True) for c in reply.tool_calls)
    return (reply.text or "") + calls


def count_role(messages: Sequence[Message], role: str) -> int:
    return sum(1 for m in messages if m.get("role") == role)


def last_tool_result(messages: Sequence[Message]) -> str | None:
    """The content of the last `role: tool` message, or None when no tool has answered yet."""
    for m in reversed(messages):
        if m.get("role") == "tool":
            return message_text(m)
    return None


def last_user_text(messages: Sequence[Message]) -> str | None:
    for m in reversed(messages):
        if m.get("role") == "user":
            return message_text(m)
    return None


def turns(*replies: Reply) -> Script:
    """A script that gives `replies[n]` on the n-th assistant turn (counting earlier turns).

    Counting assistant messages instead of calls keeps it resumable: a conversation rebuilt
    after a restart gets the reply it would have got. Past the end it repeats the last reply.
    """
    if not replies:
        raise ValueError("turns() needs at least one reply")

    def script(messages: list[Message], tools: list[dict[str, Any]]) -> Reply:
        n = count_role(messages, "assistant")
        return replies[min(n, len(replies) - 1)]

    return script
