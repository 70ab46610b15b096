"""The model routes against the scripted model server over real sockets: `openai/` models
through the OpenAI SDK (tool calls, usage, retries, time-outs, redaction, prices), every
other model through litellm, the demo model in-process, and the router that picks one."""

from __future__ import annotations

import asyncio
import http.server
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from pizzabot.agent.errors import ModelError, UserError
from pizzabot.agent.llm import LiteLLMClient, ModelReply, ModelRoute, ModelRouter
from pizzabot.agent.llm_demo import DemoModel
from pizzabot.agent.llm_openai import OpenAIClient, direct
from pizzabot.agent.llm_prices import known_price
from pizzabot.agent.skills import Skill
from pizzabot.agent.testing.model_server import Reply, ScriptedModelServer, ToolCall, turns
from tests.security.test_redaction import KEY, _EchoingProvider

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "crm__send_email",
            "description": "Send an email.",
            "parameters": {"type": "object", "properties": {"to": {"type": "string"}}},
        },
    }
]
USER = [{"role": "user", "content": "Tell Ann the pizza is here."}]


def skill(model: str | None, **options: Any) -> Skill:
    if model is None:  # inbox-only: no instructions, no model
        return Skill.model_validate({"name": "s"})
    return Skill.model_validate(
        {"name": "s", "instructions": "x", "model": model, "model_options": options}
    )


async def no_wait(seconds: float) -> None:
    pass


def direct_client(**kw: Any) -> OpenAIClient:
    return OpenAIClient(env={}, sleep=no_wait, **kw)


async def test_the_direct_route_round_trips_a_tool_call_with_usage() -> None:
    calls = [ToolCall("crm__send_email", {"to": "ann@example.test"})]
    script = turns(Reply(text="Sending it.", tool_calls=calls), Reply(text="Sent."))
    async with ScriptedModelServer(script) as srv:
        route = direct_client()
        s = skill("openai/fake", api_base=srv.openai_base, api_key="x", temperature=0.2, seed=7)
        first = await route.complete(s, list(USER), TOOLS)
        history = [
            *USER,
            {
                "role": "assistant",
                "content": first.text,
                "tool_calls": [
                    {
                        "id": first.tool_calls[0].id,
                        "type": "function",
                        "function": {"name": "crm__send_email", "arguments": '{"to": "ann"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": first.tool_calls[0].id, "content": "sent"},
        ]
        second = await route.complete(s, history, TOOLS)
        await route.aclose()
    assert first.text == "Sending it." and first.raw_finish == "tool_calls"
    assert [(c.name, c.arguments) for c in first.tool_calls] == [
        ("crm__send_email", {"to": "ann@example.test"})
    ]
    assert first.tool_calls[0].id == "call_1_0"
    assert first.tokens_in > 0 and first.tokens_out > 0 and first.attempts == 1
    assert first.model == "openai/fake" and first.cost_usd is None  # no price for "fake"
    assert second.text == "Sent." and second.tool_calls == [] and second.raw_finish == "stop"
    sent = srv.requests[0]
    assert sent["model"] == "fake" and sent["temperature"] == 0.2 and sent["seed"] == 7
    assert sent["tools"][0]["function"]["name"] == "crm__send_email"
    assert "api_base" not in sent and "api_key" not in sent and "timeout" not in sent


async def test_bad_or_unbounded_tool_arguments_reach_the_engine_unparsed() -> None:
    calls = [ToolCall("crm__send_email", '{"to": "ann'), ToolCall("crm__x", '{"n": 1e999999}')]
    async with ScriptedModelServer(turns(Reply(tool_calls=calls))) as srv:
        reply = await direct_client().complete(
            skill("openai/fake", api_base=srv.openai_base, api_key="x"), list(USER), TOOLS
        )
    assert [c.arguments for c in reply.tool_calls] == [
        {"_unparsed": '{"to": "ann'},
        {"_unparsed": '{"n": 1e999999}'},
    ]


@pytest.mark.parametrize("status", [429, 500, 502, 503, 504])
async def test_transient_errors_are_retried_with_backoff(status: int) -> None:
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    async with ScriptedModelServer(turns(Reply(text="fine"))) as srv:
        srv.fail_next(status=status, times=2)
        route = OpenAIClient(env={}, sleep=sleep, backoff_min=0.5)
        reply = await route.complete(
            skill("openai/fake", api_base=srv.openai_base, api_key="x"), list(USER), []
        )
    assert reply.text == "fine" and reply.attempts == 3
    assert len(waits) == 2 and all(w >= 0.5 for w in waits)
    assert len(srv.requests) == 3  # the SDK did not retry underneath


async def test_a_provider_that_keeps_failing_fails_the_call_with_a_reason() -> None:
    async with ScriptedModelServer(turns(Reply(text="fine"))) as srv:
        srv.fail_next(status=500, times=50)
        with pytest.raises(ModelError) as caught:
            await direct_client(attempts=3).complete(
                skill("openai/fake", api_base=srv.openai_base, api_key="x"), list(USER), []
            )
    assert "model openai/fake failed after 3 attempts" in str(caught.value)
    assert "InternalServerError (HTTP 500)" in str(caught.value)
    assert caught.value.__cause__ is None and caught.value.__suppress_context__


async def test_a_client_error_is_not_retried() -> None:
    async with ScriptedModelServer(turns(Reply(text="fine"))) as srv:
        srv.fail_next(status=400, times=1)
        with pytest.raises(ModelError, match=r"HTTP 400"):
            await direct_client().complete(
                skill("openai/fake", api_base=srv.openai_base, api_key="x"), list(USER), []
            )
    assert len(srv.requests) == 1


async def test_a_slow_model_times_out_and_is_retried() -> None:
    async def slow(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Reply:
        await asyncio.sleep(60)
        return Reply(text="too late")

    async with ScriptedModelServer(slow) as srv:
        s = skill("openai/fake", api_base=srv.openai_base, api_key="x", timeout=0.2)
        with pytest.raises(ModelError, match=r"after 2 attempts: APITimeoutError"):
            await direct_client(attempts=2).complete(s, list(USER), [])
    assert len(srv.requests) == 2


@pytest.fixture
def provider() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _EchoingProvider)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        thread.join()


async def test_a_key_the_provider_echoes_is_redacted(provider: str) -> None:
    route = OpenAIClient(env={"PROVIDER_KEY": KEY})
    s = skill("openai/fake", api_base=provider, api_key_env="PROVIDER_KEY")
    with pytest.raises(ModelError) as caught:
        await route.complete(s, list(USER), [])
    assert "HTTP 401" in str(caught.value) and "[redacted]" in str(caught.value)
    assert KEY not in str(caught.value)


async def test_a_missing_key_is_a_configuration_error() -> None:
    with pytest.raises(UserError, match="NOPE_KEY"):
        await direct_client().complete(skill("openai/fake", api_key_env="NOPE_KEY"), [], [])
    with pytest.raises(UserError, match="no API key"):
        await direct_client().complete(skill("openai/fake", api_base="http://127.0.0.1:9"), [], [])


async def test_calls_share_one_client_and_survive_the_server_closing_connections() -> None:
    from bench.model import BenchModelServer, BenchScript

    # The bench's model server answers every call with `Connection: close`.
    async with BenchModelServer(BenchScript()) as srv:
        route = direct_client()
        s = skill("openai/bench", api_base=srv.openai_base, api_key="x")
        for n in range(3):
            reply = await route.complete(s, [{"role": "user", "content": f"bench t{n} 0"}], [])
            assert reply.attempts == 1 and reply.text == f"done t{n}"
        other = skill("openai/bench", api_base=srv.openai_base, api_key="y")
        await route.complete(other, [{"role": "user", "content": "bench u 0"}], [])
        assert len(route._clients) == 2  # one per (base URL, key, organization)
        await route.aclose()
    assert len(set(srv.client_ports)) == 4


@pytest.mark.parametrize(
    ("model", "options", "expected"),
    [
        ("openai/gpt-4o", {}, "gpt-4o"),
        ("openai/house-model", {"input_cost_per_token": 1e-6, "output_cost_per_token": 2e-6}, None),
        ("openai/house-model", {}, "unknown"),
    ],
)
async def test_the_direct_route_prices_calls_as_litellm_does(
    model: str, options: dict[str, Any], expected: str | None
) -> None:
    async with ScriptedModelServer(turns(Reply(text="Pizza's here."))) as srv:
        s = skill(model, api_base=srv.openai_base, api_key="x", **options)
        reply = await direct_client().complete(s, list(USER), [])
    if expected == "unknown":
        assert reply.cost_usd is None
        return
    prices = options or _litellm().model_cost[expected]
    wanted = (
        reply.tokens_in * prices["input_cost_per_token"]
        + reply.tokens_out * prices["output_cost_per_token"]
    )
    assert reply.cost_usd == pytest.approx(wanted) and reply.cost_usd > 0


@pytest.mark.parametrize("tier", [None, "priority"])
def test_a_known_price_is_litellm_s_price(tier: str | None) -> None:
    from litellm.types.utils import PromptTokensDetailsWrapper, Usage

    litellm = _litellm()
    for model in ("gpt-4o", "gpt-4o-mini", "gpt-4.1"):
        ours = known_price(f"openai/{model}", service_tier=tier)
        assert ours is not None
        usage = Usage(
            prompt_tokens=1200,
            completion_tokens=300,
            total_tokens=1500,
            prompt_tokens_details=PromptTokensDetailsWrapper(cached_tokens=1000),
        )
        prompt, completion = litellm.cost_per_token(
            model=model, custom_llm_provider="openai", usage_object=usage, service_tier=tier
        )
        assert ours.of(tokens_in=1200, tokens_out=300, cached=1000) == pytest.approx(
            prompt + completion
        )
    assert known_price("openai/no-such-model") is None


def _litellm() -> Any:
    from pizzabot.agent.llm import import_litellm

    return import_litellm()


@pytest.mark.parametrize(
    ("model", "options", "route"),
    [
        ("openai/gpt-4o", {"api_key_env": "K", "temperature": 0, "extra_headers": {}}, "direct"),
        ("openai/fake", {"api_base": "http://x", "drop_params": True}, "litellm"),
        ("openai/o3-mini", {"max_tokens": 100}, "litellm"),
        ("openai/o3-mini", {"max_completion_tokens": 100}, "direct"),
        ("ollama_chat/llama3", {}, "litellm"),
        ("anthropic/claude-sonnet-4-5", {}, "litellm"),
        ("pizzabot/demo", {}, "demo"),
    ],
)
def test_the_router_picks_a_route_per_skill(
    model: str, options: dict[str, Any], route: str
) -> None:
    routes: dict[str, ModelRoute] = {
        "demo": DemoModel(),
        "direct": direct_client(),
        "litellm": LiteLLMClient(env={}),
    }
    router = ModelRouter(routes["demo"], routes["direct"], fallback=routes["litellm"])
    assert router.route(skill(model, **options)) is routes[route]
    assert direct(skill(model, **options)) is (route == "direct")


class _Recording:
    def __init__(self) -> None:
        self.prepared = 0

    def accepts(self, skill: Skill) -> bool:
        return True

    async def prepare(self) -> None:
        self.prepared += 1

    async def aclose(self) -> None:
        pass

    async def complete(
        self, skill: Skill, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
    ) -> ModelReply:
        raise AssertionError("not called")


async def test_the_router_prepares_only_the_routes_its_skills_need() -> None:
    direct_route, fallback = _Recording(), _Recording()
    direct_route.accepts = lambda s: (s.model or "").startswith("openai/")  # type: ignore[method-assign]
    router = ModelRouter(direct_route, fallback=fallback)
    await router.prepare([skill("openai/a"), skill("openai/b"), skill(None)])
    assert (direct_route.prepared, fallback.prepared) == (1, 0)
    await router.prepare([skill("ollama_chat/c")])
    assert fallback.prepared == 1


async def test_an_openai_model_with_an_option_only_litellm_knows_goes_through_litellm() -> None:
    async with ScriptedModelServer(turns(Reply(text="via litellm"))) as srv:
        router = ModelRouter(direct_client(), fallback=LiteLLMClient(env={}, attempts=1))
        s = skill("openai/fake", api_base=srv.openai_base, api_key="x", drop_params=True)
        reply = await router.complete(s, list(USER), [])
    assert reply.text == "via litellm" and reply.model == "openai/fake"


async def test_the_demo_route_asks_once_then_reports() -> None:
    demo = DemoModel()
    s = skill("pizzabot/demo")
    first = await demo.complete(s, [{"role": "user", "content": "friday"}], TOOLS)
    [call] = first.tool_calls
    assert call.name == "crm__send_email" and call.arguments["to"] == "team@example.com"
    assert first.tokens_in == 60 and first.cost_usd is None and first.model == "pizzabot/demo"
    history = [
        {"role": "user", "content": "friday"},
        {
            "role": "assistant",
            "content": first.text,
            "tool_calls": [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": '{"to": "a@b", "tone": "warm"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": call.id, "content": "rejected: not today"},
    ]
    second = await demo.complete(s, history, TOOLS)
    assert second.tool_calls == [] and "not today" in (second.text or "")
