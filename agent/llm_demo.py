"""The offline demo model `pizzabot/demo`: a model route of its own, clearly labelled.

It lets a newcomer see Action → decision → Unread without a key: it asks for the demo
server's `send_email` once, then writes a summary of what happened (quoting a rejection's
reason). It is a demo; no other code path treats it specially — it reaches the engine
through the model router like any route, and needs no model library at all.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

from pizzabot.agent.llm import ModelReply, ToolCall
from pizzabot.agent.skills import Skill

MODEL = "pizzabot/demo"


def _respond(
    messages: list[dict[str, Any]], tools: list[dict[str, Any]]
) -> tuple[str | None, dict[str, Any] | None]:
    tool_names = [t["function"]["name"] for t in tools]
    results = [m for m in messages if m.get("role") == "tool"]
    task = next((m["content"] for m in messages if m.get("role") == "user"), "")
    if not results:
        name = next((n for n in tool_names if n.endswith("send_email")), None)
        if name is None:
            return "[demo] I have no send_email tool, so there is nothing to ask you about.", None
        args = {
            "to": "team@example.com",
            "subject": "Pizza Friday",
            "tone": "friendly",
            "copies": 1,
            "body": f"Hi team, a note about: {task or 'Friday'}. Pizza at noon!",
        }
        return "[demo] I drafted the email and would like to send it.", {
            "name": name,
            "arguments": args,
        }
    last = str(results[-1].get("content", ""))
    call_args = {}
    for m in messages:
        for tc in m.get("tool_calls") or []:
            call_args = json.loads(tc["function"]["arguments"])
    if "rejected" in last.lower():
        return f"[demo] Understood, I did not send it. You said: {last}", None
    return (
        f"[demo] Done. The email went out as approved (to {call_args.get('to')}, "
        f"tone {call_args.get('tone')}, copies {call_args.get('copies')}). Tool said: {last}"
    ), None


class DemoModel:
    """The route of `pizzabot/demo`: it answers in-process, with made-up token counts and
    no price (tokens count; the run says its cost is unknown)."""

    def accepts(self, skill: Skill) -> bool:
        return skill.model == MODEL

    async def prepare(self) -> None:
        """Nothing to load."""

    async def aclose(self) -> None:
        """Nothing to close."""

    async def complete(
        self, skill: Skill, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
    ) -> ModelReply:
        started = time.perf_counter()
        text, call = _respond(messages, tools)
        calls = []
        if call is not None:
            calls.append(
                ToolCall(
                    id=f"call_{uuid.uuid4().hex[:8]}",
                    name=call["name"],
                    arguments=call["arguments"],
                )
            )
        return ModelReply(
            text=text,
            tool_calls=calls,
            tokens_in=60,
            tokens_out=len((text or "").split()) + 20,
            cost_usd=None,
            latency_ms=(time.perf_counter() - started) * 1000,
            model=MODEL,
            raw_finish="tool_calls" if call else "stop",
        )
