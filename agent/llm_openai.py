"""The direct route for OpenAI models: the official SDK (`AsyncOpenAI`), without litellm.

Most skills name an `openai/...` model (OpenAI itself, or any server that speaks its
protocol: vLLM, a proxy, the test suite's scripted model). For those, litellm's translation
layer is all cost: ~200 MiB and seconds of import, and per call a logging object and a
price lookup. The OpenAI SDK is the protocol's own client; this route uses it directly when
every model option of the skill is one it understands, and leaves anything else to litellm
so a skill behaves as before. Prices come from litellm's price map read as data
(`pizzabot.agent.llm_prices`), so USD budgets hold on this route too.

One `AsyncOpenAI` client is kept per (base URL, key, organization), so calls share its
connection pool; the SDK's own retries are off (the route retries with backoff itself).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

from pizzabot.agent.errors import UserError
from pizzabot.agent.llm import (
    ModelReply,
    Retries,
    Tally,
    failed,
    freeze_after_import,
    key_from_env,
    secret_options,
    tool_calls,
)
from pizzabot.agent.llm_prices import Price, known_price, own_price
from pizzabot.agent.redaction import Redactor
from pizzabot.agent.skills import Skill

if TYPE_CHECKING:
    from openai import AsyncOpenAI

PREFIX = "openai/"

#: How the client is reached (consumed here, never sent as a completion parameter).
CLIENT_OPTIONS = frozenset(
    {"api_base", "base_url", "api_key", "api_key_env", "organization", "timeout"}
)
#: A price the skill sets itself (read, never sent).
PRICE_OPTIONS = frozenset({"input_cost_per_token", "output_cost_per_token"})
#: Chat completion parameters sent as they are.
PARAMS = frozenset(
    {
        "temperature",
        "top_p",
        "max_tokens",
        "max_completion_tokens",
        "stop",
        "seed",
        "n",
        "presence_penalty",
        "frequency_penalty",
        "logit_bias",
        "logprobs",
        "top_logprobs",
        "user",
        "tool_choice",
        "parallel_tool_calls",
        "response_format",
        "reasoning_effort",
        "verbosity",
        "service_tier",
        "metadata",
        "store",
        "prediction",
        "prompt_cache_key",
        "safety_identifier",
        "extra_headers",
        "extra_body",
        "extra_query",
    }
)
KNOWN_OPTIONS = CLIENT_OPTIONS | PRICE_OPTIONS | PARAMS

#: Reasoning models, for which litellm renames `max_tokens` (the API refuses it there).
_REASONING = re.compile(r"(o\d|gpt-5)")


def direct(skill: Skill) -> bool:
    """Whether the skill's model goes through the OpenAI SDK rather than litellm."""
    model = skill.model or ""
    if not model.startswith(PREFIX) or not set(skill.model_options) <= KNOWN_OPTIONS:
        return False
    return not (
        _REASONING.match(model.removeprefix(PREFIX)) and "max_tokens" in skill.model_options
    )


def import_openai() -> Any:
    import openai
    import openai.resources.chat.completions  # loaded on first use otherwise: on the loop

    freeze_after_import("openai")
    return openai


def _transient(exc: BaseException) -> bool:
    openai = import_openai()
    if isinstance(exc, openai.RateLimitError | openai.InternalServerError):
        return True
    if isinstance(exc, openai.APIConnectionError):  # a dropped connection, a time-out
        return True
    return isinstance(exc, openai.APIStatusError) and exc.status_code in (502, 503, 504)


class OpenAIClient:
    """The route for `openai/...` models whose options it knows (see `direct`). `env`
    resolves `api_key_env` and, as the SDK would, `OPENAI_API_KEY`, `OPENAI_BASE_URL` (or
    `OPENAI_API_BASE`) and `OPENAI_ORGANIZATION`."""

    def __init__(
        self,
        *,
        env: Mapping[str, str],
        attempts: int = 4,
        backoff_min: float = 0.5,
        backoff_max: float = 20.0,
        timeout: float = 120.0,
        sleep: Callable[[float], Awaitable[None]] | None = None,
        redactor: Redactor | None = None,
    ) -> None:
        self._env = env
        self._redactor = redactor or Redactor()
        self._retries = Retries(attempts, backoff_min, backoff_max, sleep)
        self._timeout = timeout
        self._clients: dict[tuple[str | None, str, str | None], AsyncOpenAI] = {}
        self._prices: dict[tuple[str, str | None], Price | None] = {}

    def accepts(self, skill: Skill) -> bool:
        return direct(skill)

    async def prepare(self) -> None:
        await asyncio.to_thread(import_openai)

    async def _price(self, model: str, options: Mapping[str, Any]) -> Price | None:
        """The skill's own price, else the listed one (read once per model, off the loop)."""
        own = own_price(options)
        if own is not None:
            return own
        key = (model, options.get("service_tier"))
        if key not in self._prices:
            self._prices[key] = await asyncio.to_thread(known_price, model, service_tier=key[1])
        return self._prices[key]

    def _client(self, base_url: str | None, key: str, org: str | None) -> AsyncOpenAI:
        client = self._clients.get((base_url, key, org))
        if client is None:
            openai = import_openai()
            client = openai.AsyncOpenAI(
                api_key=key, base_url=base_url, organization=org, max_retries=0
            )
            self._clients[(base_url, key, org)] = client
        return client

    def _options(self, skill: Skill) -> dict[str, Any]:
        options = dict(skill.model_options)
        key_from_env(skill, options, self._env)
        key = options.get("api_key") or self._env.get("OPENAI_API_KEY")
        if not key:
            raise UserError(
                f"skill {skill.name!r}: model {skill.model} has no API key "
                "(set api_key_env in model_options, or OPENAI_API_KEY)"
            )
        options["api_key"] = key  # so an error echoing it is redacted
        options.setdefault("timeout", self._timeout)
        return options

    async def complete(
        self, skill: Skill, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
    ) -> ModelReply:
        if skill.model is None:
            raise UserError(f"skill {skill.name!r} is inbox-only: it has no model to call")
        options = self._options(skill)
        env = self._env
        base_url = (
            options.get("api_base")
            or options.get("base_url")
            or env.get("OPENAI_BASE_URL")
            or env.get("OPENAI_API_BASE")
        )
        org = options.get("organization") or env.get("OPENAI_ORGANIZATION")
        kwargs: dict[str, Any] = {k: v for k, v in options.items() if k in PARAMS}
        kwargs.update(model=skill.model.removeprefix(PREFIX), messages=messages)
        kwargs["timeout"] = options["timeout"]
        if tools:
            kwargs["tools"] = tools
        tally = Tally()
        try:
            client = self._client(base_url, options["api_key"], org)
            response = await self._retries.call(
                lambda: client.chat.completions.create(**kwargs), transient=_transient, tally=tally
            )
        except Exception as exc:
            redact = self._redactor.with_values(secret_options(options))
            raise failed(skill, exc, tally.attempts, redact) from None
        latency = tally.latency_ms()
        choice = response.choices[0]
        usage = response.usage
        tokens_in = usage.prompt_tokens if usage is not None else 0
        tokens_out = usage.completion_tokens if usage is not None else 0
        details = usage.prompt_tokens_details if usage is not None else None
        price = await self._price(skill.model, options)
        return ModelReply(
            text=choice.message.content or None,
            tool_calls=tool_calls(choice.message.tool_calls),
            tokens_in=tokens_in,
            tokens_out=tokens_out,
            cost_usd=price.of(
                tokens_in=tokens_in,
                tokens_out=tokens_out,
                cached=(details.cached_tokens or 0) if details is not None else 0,
            )
            if price is not None
            else None,
            latency_ms=latency,
            model=skill.model,
            attempts=tally.attempts,
            raw_finish=choice.finish_reason,
        )

    async def aclose(self) -> None:
        clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            await client.close()
