"""The offline demo model `pizzabot/demo`: a litellm custom provider, clearly labelled.

It lets a newcomer see Action → decision → Unread without a key: it asks for the demo
server's `send_email` once, then writes a summary of what happened (quoting a rejection's
reason). It is a demo; no other code path treats it specially — it reaches the engine
through litellm like any provider.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

PROVIDER = "pizzabot"


def _reply(model_response: Any, *, text: str | None, tool_call: dict[str, Any] | None) -> Any:
    from litellm.types.utils import ChatCompletionMessageToolCall, Function, Message, Usage

    message = Message(content=text, role="assistant")
    if tool_call is not None:
        message.tool_calls = [
            ChatCompletionMessageToolCall(
                id=f"call_{uuid.uuid4().hex[:8]}",
                type="function",
                function=Function(
                    name=tool_call["name"], arguments=json.dumps(tool_call["arguments"])
                ),
            )
        ]
    model_response.choices[0].message = message
    model_response.choices[0].finish_reason = "tool_calls" if tool_call else "stop"
    words = len((text or "").split()) + 20
    model_response.usage = Usage(prompt_tokens=60, completion_tokens=words, total_tokens=60 + words)
    model_response.created = int(time.time())
    model_response.model = "pizzabot/demo"
    return model_response


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


def register(litellm: Any) -> None:
    """Add the demo provider to litellm (called right after litellm's lazy import)."""
    from litellm import CustomLLM  # type: ignore[attr-defined]

    class DemoLLM(CustomLLM):  # type: ignore[misc]
        async def acompletion(self, *args: Any, **kwargs: Any) -> Any:
            messages = kwargs.get("messages") or (args[1] if len(args) > 1 else [])
            tools = (kwargs.get("optional_params") or {}).get("tools") or []
            text, call = _respond(messages, tools)
            return _reply(kwargs["model_response"], text=text, tool_call=call)

        def completion(self, *args: Any, **kwargs: Any) -> Any:
            messages = kwargs.get("messages") or []
            tools = (kwargs.get("optional_params") or {}).get("tools") or []
            text, call = _respond(messages, tools)
            return _reply(kwargs["model_response"], text=text, tool_call=call)

    existing = [p for p in (litellm.custom_provider_map or []) if p.get("provider") != PROVIDER]
    litellm.custom_provider_map = [*existing, {"provider": PROVIDER, "custom_handler": DemoLLM()}]
    # litellm reads the map when it is set through its setter helpers; refresh it explicitly.
    from litellm.utils import custom_llm_setup

    custom_llm_setup()  # type: ignore[no-untyped-call]
