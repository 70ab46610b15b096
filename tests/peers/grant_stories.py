"""What the grants' stories share: a scripted model that makes the calls a run's input lists,
one after the other, and readers of what the run's log and the tool's own log say.

    run = await st.start_run("test", calls(("to@x.example", "one"), ("to@x.example", "two")))
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from pizzabot.agent.testing.scripts import Message, Reply, ToolCall, message_text


def mail(to: str, subject: str) -> dict[str, Any]:
    return {"to": to, "subject": subject, "body": "Hello"}


def calls(*mails: tuple[str, str]) -> str:
    """A run's input: the `crm.send_email` calls the model makes, in order."""
    return json.dumps([mail(to, subject) for to, subject in mails])


def calls_from_input(messages: list[Message], tools: list[dict[str, Any]]) -> Reply:
    """The model makes the input's calls one at a time (the next once the last has a result),
    then says how many it made."""
    wanted = json.loads(next(message_text(m) for m in messages if m["role"] == "user"))
    done = sum(1 for m in messages if m.get("role") == "tool")
    if done < len(wanted):
        return Reply(tool_calls=[ToolCall("crm__send_email", wanted[done])])
    return Reply(text=f"made {done} calls")


def started(run: dict[str, Any]) -> list[dict[str, Any]]:
    """The run's `tool_started` events' data, in order."""
    return [e["data"] for e in run["events"] if e["kind"] == "tool_started"]


def asked(run: dict[str, Any]) -> list[str]:
    """The subjects of the calls a person was asked about, in order."""
    return [e["data"]["args"]["subject"] for e in run["events"] if e["kind"] == "tool_request"]


def sent(tool_calls: Sequence[dict[str, Any]]) -> list[str]:
    """The subjects the real MCP tool sent, in order."""
    return [c["args"]["subject"] for c in tool_calls if c["tool"] == "send_email"]
