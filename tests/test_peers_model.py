"""The scripted model server, reached through litellm over its OpenAI and Ollama routes."""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any

import pytest

from pizzabot.agent.testing.model_server import (
    Reply,
    ScriptedModelServer,
    ToolCall,
    count_role,
    estimate_tokens,
    last_tool_result,
    last_user_text,
    turns,
)

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "send_email",
            "description": "Send an email.",
            "parameters": {
                "type": "object",
                "properties": {"to": {"type": "string"}, "subject": {"type": "string"}},
                "required": ["to", "subject"],
            },
        },
    }
]

USER = [{"role": "user", "content": "Tell Ann the pizza is here."}]


def _litellm() -> Any:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    litellm.suppress_debug_info = True
    return litellm


def _email_then_done(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Reply:
    """Send one email, then report what the tool said."""
    result = last_tool_result(messages)
    if result is None:
        args = {"to": "ann@example.test", "subject": "pizza"}
        return Reply(text="Sending it.", tool_calls=[ToolCall("send_email", args)])
    return Reply(text=f"Done: {result}")


def _routes(srv: ScriptedModelServer) -> list[tuple[str, dict[str, Any]]]:
    return [
        ("openai/fake", {"api_base": srv.openai_base, "api_key": "x"}),
        ("ollama_chat/fake", {"api_base": srv.ollama_base}),
    ]


@pytest.mark.parametrize("route", ["openai", "ollama"])
async def test_tool_call_round_trip_with_usage(route: str) -> None:
    litellm = _litellm()
    seen: list[tuple[list[dict[str, Any]], list[dict[str, Any]]]] = []

    def script(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Reply:
        seen.append((messages, tools))
        return _email_then_done(messages, tools)

    async with ScriptedModelServer(script) as srv:
        model_name = "openai/fake" if route == "openai" else "ollama_chat/fake"
        kw = dict(_routes(srv))[model_name]
        first = await litellm.acompletion(model=model_name, messages=USER, tools=TOOLS, **kw)
        message = first.choices[0].message
        assert message.content == "Sending it."
        assert first.choices[0].finish_reason == "tool_calls"
        [call] = message.tool_calls
        assert call.function.name == "send_email"
        assert json.loads(call.function.arguments) == {"to": "ann@example.test", "subject": "pizza"}
        assert call.id == "call_1_0"  # deterministic: one message so far, first call
        assert first.usage.prompt_tokens == estimate_tokens(USER[0]["content"])
        assert first.usage.completion_tokens > 0

        history = [
            *USER,
            message.model_dump(exclude_none=True),
            {"role": "tool", "tool_call_id": call.id, "content": "sent to ann@example.test"},
        ]
        second = await litellm.acompletion(model=model_name, messages=history, tools=TOOLS, **kw)
        assert second.choices[0].message.content == "Done: sent to ann@example.test"
        assert second.choices[0].finish_reason == "stop"
        assert not second.choices[0].message.tool_calls

    # The script saw OpenAI-shaped messages and the tools on both routes.
    messages, tools = seen[1]
    assert [m["role"] for m in messages] == ["user", "assistant", "tool"]
    assert json.loads(messages[1]["tool_calls"][0]["function"]["arguments"])["subject"] == "pizza"
    assert tools[0]["function"]["name"] == "send_email"
    assert len(srv.requests) == 2
    assert srv.requests[0]["messages"][0]["content"] == USER[0]["content"]


async def test_openai_streaming_rebuilds_text_tool_calls_and_usage() -> None:
    litellm = _litellm()
    async with ScriptedModelServer(_email_then_done) as srv:
        stream = await litellm.acompletion(
            model="openai/fake",
            api_base=srv.openai_base,
            api_key="x",
            messages=USER,
            tools=TOOLS,
            stream=True,
            stream_options={"include_usage": True},
        )
        chunks = [chunk async for chunk in stream]
    assert srv.requests[0]["stream"] is True
    assert len(chunks) > 3
    built = litellm.stream_chunk_builder(chunks, messages=USER)
    message = built.choices[0].message
    assert message.content == "Sending it."
    [call] = message.tool_calls
    assert call.function.name == "send_email"
    assert json.loads(call.function.arguments) == {"to": "ann@example.test", "subject": "pizza"}
    assert built.usage.prompt_tokens == estimate_tokens(USER[0]["content"])
    assert built.usage.completion_tokens > 0


async def test_ollama_streaming_text() -> None:
    litellm = _litellm()
    async with ScriptedModelServer(turns(Reply(text="The pizza is here."))) as srv:
        stream = await litellm.acompletion(
            model="ollama_chat/fake", api_base=srv.ollama_base, messages=USER, stream=True
        )
        chunks = [chunk async for chunk in stream]
    built = litellm.stream_chunk_builder(chunks, messages=USER)
    assert built.choices[0].message.content == "The pizza is here."
    assert srv.requests[0]["stream"] is True


@pytest.mark.parametrize(
    ("status", "exception"),
    [(429, "RateLimitError"), (500, "InternalServerError"), (503, "ServiceUnavailableError")],
)
async def test_fail_next_gives_litellm_exceptions_then_recovers(
    status: int, exception: str
) -> None:
    litellm = _litellm()
    async with ScriptedModelServer(turns(Reply(text="fine"))) as srv:
        for model, kw in _routes(srv):
            srv.fail_next(status=status, times=1, retry_after=7)
            with pytest.raises(getattr(litellm, exception)) as caught:
                # num_retries=0: otherwise the OpenAI SDK quietly retries twice on its own.
                await litellm.acompletion(model=model, messages=USER, num_retries=0, **kw)
            assert caught.value.status_code == status
            if status == 429:
                assert caught.value.litellm_response_headers["retry-after"] == "7"
            answer = await litellm.acompletion(model=model, messages=USER, num_retries=0, **kw)
            assert answer.choices[0].message.content == "fine"
    assert len(srv.requests) == 4  # failed requests are recorded too


async def test_fail_next_counts_down() -> None:
    litellm = _litellm()
    async with ScriptedModelServer(turns(Reply(text="fine"))) as srv:
        srv.fail_next(status=500, times=2)
        kw = {"api_base": srv.openai_base, "api_key": "x", "num_retries": 0}
        for _ in range(2):
            with pytest.raises(litellm.InternalServerError):
                await litellm.acompletion(model="openai/fake", messages=USER, **kw)
        answer = await litellm.acompletion(model="openai/fake", messages=USER, **kw)
    assert answer.choices[0].message.content == "fine"


async def test_slow_script_times_out_and_shutdown_does_not_wait_for_it() -> None:
    litellm = _litellm()
    started = asyncio.Event()

    async def slow(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Reply:
        started.set()  # runs on the test's loop, so plain asyncio objects work
        await asyncio.sleep(60)
        return Reply(text="too late")

    async with ScriptedModelServer(slow) as srv:
        for model, kw in _routes(srv):
            with pytest.raises(litellm.Timeout):
                await litellm.acompletion(
                    model=model, messages=USER, timeout=0.3, num_retries=0, **kw
                )
    assert started.is_set()


async def test_a_script_that_raises_fails_the_block() -> None:
    litellm = _litellm()

    def broken(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Reply:
        raise KeyError("oops")

    with pytest.raises(RuntimeError, match="script raised") as caught:
        async with ScriptedModelServer(broken) as srv:
            with pytest.raises(litellm.InternalServerError):
                await litellm.acompletion(
                    model="openai/fake",
                    api_base=srv.openai_base,
                    api_key="x",
                    messages=USER,
                    num_retries=0,
                )
    assert isinstance(caught.value.__cause__, KeyError)


def test_script_helpers() -> None:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": [{"type": "text", "text": "first"}]},
        {"role": "assistant", "content": None, "tool_calls": []},
        {"role": "tool", "tool_call_id": "a", "content": "one"},
        {"role": "tool", "tool_call_id": "b", "content": "two"},
        {"role": "user", "content": "second"},
    ]
    assert count_role(messages, "tool") == 2
    assert last_tool_result(messages) == "two"
    assert last_tool_result(messages[:3]) is None
    assert last_user_text(messages) == "second"
    assert last_user_text(messages[:2]) == "first"
    assert estimate_tokens("") == 1
    assert estimate_tokens("abcdefgh") == 3

    script = turns(Reply(text="a"), Reply(text="b"))
    assert script([], []) == Reply(text="a")
    assert script(messages, []) == Reply(text="b")  # one assistant turn so far
    assert script([*messages, {"role": "assistant", "content": "b"}], []) == Reply(text="b")


@pytest.mark.parametrize(
    ("model", "options", "priced"),
    [
        # litellm's bundled price map knows this one
        ("openai/gpt-4o-mini", {}, True),
        # a self-hosted model priced in the skill's model_options
        ("openai/house-model", {"input_cost_per_token": 1e-6, "output_cost_per_token": 2e-6}, True),
        # nobody knows this price: tokens count, cost is unknown
        ("openai/house-model", {}, False),
    ],
)
async def test_the_engine_client_reports_the_price_litellm_knows(
    model: str, options: dict[str, Any], priced: bool
) -> None:
    from pizzabot.agent.llm import LiteLLMClient
    from pizzabot.agent.skills import Skill

    async with ScriptedModelServer(turns(Reply(text="Pizza's here."))) as srv:
        skill = Skill.model_validate(
            {
                "name": "priced",
                "instructions": "x",
                "model": model,
                "model_options": {"api_base": srv.openai_base, "api_key": "x", **options},
            }
        )
        reply = await LiteLLMClient(env={}, attempts=1).complete(skill, list(USER), [])
    assert reply.text == "Pizza's here."
    assert reply.tokens_in > 0 and reply.tokens_out > 0
    if not priced:
        assert reply.cost_usd is None
        return
    prices = options or _litellm().model_cost["gpt-4o-mini"]
    expected = (
        reply.tokens_in * prices["input_cost_per_token"]
        + reply.tokens_out * prices["output_cost_per_token"]
    )
    assert reply.cost_usd == pytest.approx(expected)
    assert reply.cost_usd > 0
