"""What the agent examples share: where Pizza Bot is, a model to talk to, and the one tool.

The model is `OPENAI_BASE_URL` + `OPENAI_MODEL` + `OPENAI_API_KEY` when set (any
OpenAI-compatible server); otherwise Pizza Bot's scripted model server, which asks to mail
Ann once and then reports what the tool said, so the examples run with no key and no network.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import AsyncIterator
from typing import Any

from pizzabot.agent.testing.model_server import ScriptedModelServer
from pizzabot.agent.testing.scripts import Reply, ToolCall, count_role, last_tool_result
from pizzabot.cli.client import connect

PROMPT = "Send Ann the quote."
#: The skill that says who decides: `approvals`, which `make serve` loads; PIZZABOT_SKILL
#: names another (`agents.yaml` here is one to copy).
SKILL = os.environ.get("PIZZABOT_SKILL", "approvals")


def server() -> tuple[str, str]:
    """Pizza Bot's URL (PIZZABOT_URL, as `pizzabot` finds it) and the agent's own token of
    scope ask (PIZZABOT_AGENT_TOKEN): an agent asks with a token that can decide nothing."""
    token = os.environ.get("PIZZABOT_AGENT_TOKEN")
    if not token:
        raise SystemExit(
            "no PIZZABOT_AGENT_TOKEN: give this agent a token that can only ask, e.g.\n"
            "  export PIZZABOT_AGENT_TOKEN=$(pizzabot tokens create my-agent --scope ask)"
        )
    api = connect(None, token)
    return api.url, api.token


def send_email(to: str, subject: str, body: str) -> str:
    """Send an email (here: say so)."""
    print("send_email ran:", json.dumps({"to": to, "subject": subject, "body": body}), flush=True)
    return f"sent to {to}"


def _script(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Reply:
    if count_role(messages, "tool") == 0:
        args = {"to": "ann@example.com", "subject": "Quote", "body": "Here is the quote."}
        return Reply(tool_calls=[ToolCall("send_email", args)])
    return Reply(text=f"Done. The tool said: {last_tool_result(messages)}")


@contextlib.asynccontextmanager
async def model() -> AsyncIterator[tuple[str, str, str]]:
    """(base URL, model name, API key) of an OpenAI-compatible chat model."""
    if base := os.environ.get("OPENAI_BASE_URL"):
        yield base, os.environ.get("OPENAI_MODEL", "gpt-4o-mini"), os.environ["OPENAI_API_KEY"]
        return
    async with ScriptedModelServer(_script) as scripted:
        yield scripted.openai_base, "scripted", "none"
