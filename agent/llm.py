"""Model calls: the routes a skill's model is reached by, and what every route guarantees.

A skill's `model` picks its route (`ModelRouter`): `openai/...` models whose options the
OpenAI SDK understands go straight through it (`pizzabot.agent.llm_openai`), the offline demo
model has a route of its own (`pizzabot.agent.llm_demo`), and everything else goes through
litellm, which knows every other provider. litellm costs seconds and ~200 MiB to import, so it is imported on
the first call that needs it, never at module import: the server must answer `/healthz` at
once, and a server whose skills never need litellm never loads it.

Every route gives the same guarantees: transient provider errors (429, 5xx, timeouts,
dropped connections) are retried with exponential backoff (tenacity; the SDK's own retries
are off); after the last try the run fails with a readable reason — with the call's API key
and any other secret redacted, since a provider's error may echo the key and the reason is
stored and shown. Tool arguments are read with their numbers bounded.
"""

from __future__ import annotations

import asyncio
import gc
import os
import re
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt, wait_exponential

from pizzabot.agent.argforms import loads_json
from pizzabot.agent.errors import ModelError, UserError
from pizzabot.agent.redaction import Redactor
from pizzabot.agent.skills import Skill

#: Model options whose string values are secrets: what a provider's error may echo.
_SECRET_OPTION = re.compile(r"key|secret|token|password|credential", re.IGNORECASE)

T = TypeVar("T")


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str  # the wire name, "server__tool"
    arguments: dict[str, Any]


@dataclass(frozen=True)
class ModelReply:
    text: str | None
    tool_calls: list[ToolCall]
    tokens_in: int
    tokens_out: int
    cost_usd: float | None  # None: the provider's price is unknown
    latency_ms: float
    model: str
    attempts: int = 1
    raw_finish: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


class ModelClient(Protocol):
    async def complete(
        self, skill: Skill, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
    ) -> ModelReply: ...


class ModelRoute(ModelClient, Protocol):
    """One way to reach models: which skills it serves, and how to load its library ahead."""

    def accepts(self, skill: Skill) -> bool: ...

    async def prepare(self) -> None:
        """Load what the first call would (off the event loop), so that call does not wait."""

    async def aclose(self) -> None:
        """Close the connections the route keeps."""


class ModelRouter:
    """A `ModelClient` that sends each skill to the first route that accepts it, else to
    `fallback` (litellm, which accepts every model)."""

    def __init__(self, *routes: ModelRoute, fallback: ModelRoute) -> None:
        self.routes = (*routes, fallback)

    def route(self, skill: Skill) -> ModelRoute:
        return next(r for r in self.routes if r is self.routes[-1] or r.accepts(skill))

    async def complete(
        self, skill: Skill, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
    ) -> ModelReply:
        return await self.route(skill).complete(skill, messages, tools)

    async def prepare(self, skills: Iterable[Skill]) -> None:
        """Load the libraries these skills' routes need, and only those."""
        needed: list[ModelRoute] = []
        for skill in skills:
            route = self.route(skill) if skill.model is not None else None
            if route is not None and route not in needed:
                needed.append(route)
        for route in needed:
            await route.prepare()

    async def aclose(self) -> None:
        for route in self.routes:
            await route.aclose()


#: The libraries whose import-time objects were moved out of the garbage collector's sight.
_frozen: set[str] = set()


def freeze_after_import(name: str) -> None:
    """A heavy library's import leaves objects that live as long as the process (litellm's
    are ~450,000); a full collection walks them all (~230 ms on the event loop for litellm,
    every so often). Frozen once, they are never walked; garbage still goes by reference
    counting and younger collections."""
    if name not in _frozen:
        _frozen.add(name)
        gc.freeze()


def import_litellm() -> Any:
    # The bundled price map, not a download: no network access is tried at import.
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    litellm.suppress_debug_info = True
    freeze_after_import("litellm")
    return litellm


@dataclass
class Tally:
    """A call's tries so far, and when the last one started."""

    attempts: int = 0
    started: float = 0.0

    def latency_ms(self) -> float:
        return (time.perf_counter() - self.started) * 1000


@dataclass(frozen=True)
class Retries:
    """How a route retries a transient failure: `attempts` in all, backoff between them."""

    attempts: int = 4
    backoff_min: float = 0.5
    backoff_max: float = 20.0
    sleep: Callable[[float], Awaitable[None]] | None = None

    async def call(
        self,
        send: Callable[[], Awaitable[T]],
        *,
        transient: Callable[[BaseException], bool],
        tally: Tally,
    ) -> T:
        extra: dict[str, Any] = {} if self.sleep is None else {"sleep": self.sleep}
        async for attempt in AsyncRetrying(
            stop=stop_after_attempt(self.attempts),
            wait=wait_exponential(min=self.backoff_min, max=self.backoff_max),
            retry=retry_if_exception(transient),
            reraise=True,
            **extra,
        ):
            with attempt:
                tally.attempts += 1
                tally.started = time.perf_counter()
                return await send()
        raise AssertionError("unreachable: tenacity reraises the last error")


def failed(
    skill: Skill, exc: BaseException, attempts: int, redact: Callable[[str], str]
) -> ModelError:
    """The run's reason, readable and redacted. Not chained by the caller (`from None`): a
    logged traceback of the cause would print the unredacted text."""
    status = getattr(exc, "status_code", None)
    # Redacted before it is cut: a key cut in half no longer matches its value.
    whole = redact(str(exc))
    text = whole.splitlines()[0] if whole else type(exc).__name__
    why = f"{type(exc).__name__}{f' (HTTP {status})' if status else ''}: {text[:300]}"
    tries = f" after {attempts} attempts" if attempts > 1 else ""
    return ModelError(f"model {skill.model} failed{tries}: {why}")


def key_from_env(skill: Skill, options: dict[str, Any], env: Mapping[str, str]) -> None:
    """Replace `api_key_env` with the key it names (in place)."""
    key_env = options.pop("api_key_env", None)
    if key_env:
        if key_env not in env:
            raise UserError(
                f"skill {skill.name!r}: environment variable {key_env} (api_key_env) is not set"
            )
        options["api_key"] = env[key_env]


def secret_options(options: Mapping[str, Any]) -> list[str]:
    found: list[str] = []
    for key, value in options.items():
        if isinstance(value, str) and _SECRET_OPTION.search(key):
            found.append(value)
        elif isinstance(value, Mapping):  # extra_headers and the like
            found.extend(secret_options(value))
    return found


def tool_calls(calls: Iterable[Any] | None) -> list[ToolCall]:
    """The engine's tool calls from an OpenAI-shaped message's `tool_calls`."""
    found: list[ToolCall] = []
    for i, tc in enumerate(calls or []):
        raw = tc.function.arguments or "{}"
        try:
            # Numbers bounded: a huge literal would block the loop or fail every later step.
            args = loads_json(raw) if isinstance(raw, str) else dict(raw)
        except ValueError:
            args = {"_unparsed": raw}
        found.append(
            ToolCall(
                id=tc.id or f"call_{i}",
                name=tc.function.name,
                arguments=args if isinstance(args, dict) else {"value": args},
            )
        )
    return found


class LiteLLMClient:
    """The route for every provider: litellm. `env` resolves a skill's `api_key_env`;
    `redactor` knows the server's other secrets (the call's own key is added per call)."""

    def __init__(
        self,
        *,
        env: Mapping[str, str],
        attempts: int = 4,
        backoff_min: float = 0.5,
        backoff_max: float = 20.0,
        timeout: float = 120.0,
        sleep: Callable[[float], Awaitable[None]] | None = None,
        on_import: Callable[[Any], None] | None = None,
        redactor: Redactor | None = None,
    ) -> None:
        self._env = env
        self._redactor = redactor or Redactor()
        self._on_import = on_import
        self._prepared = False
        self._retries = Retries(attempts, backoff_min, backoff_max, sleep)
        self._timeout = timeout

    def accepts(self, skill: Skill) -> bool:
        return skill.model is not None

    async def prepare(self) -> None:
        if not self._prepared:
            # Seconds of import: off the event loop, so the worker's heartbeat keeps the lease
            # (and the server answers) meanwhile; it may be importing on another thread already.
            litellm = await asyncio.to_thread(import_litellm)
            if self._on_import is not None and not self._prepared:
                self._on_import(litellm)
            self._prepared = True

    async def aclose(self) -> None:
        """Nothing to close: litellm keeps its own clients for the process's life."""

    def _options(self, skill: Skill) -> dict[str, Any]:
        options = dict(skill.model_options)
        key_from_env(skill, options, self._env)
        options.setdefault("timeout", self._timeout)
        # The engine retries with its own backoff; the OpenAI SDK must not retry underneath it.
        options.setdefault("max_retries", 0)
        return options

    async def complete(
        self, skill: Skill, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
    ) -> ModelReply:
        if skill.model is None:
            raise UserError(f"skill {skill.name!r} is inbox-only: it has no model to call")
        await self.prepare()
        litellm = import_litellm()
        options = self._options(skill)
        kwargs: dict[str, Any] = {"model": skill.model, "messages": messages, **options}
        if tools:
            kwargs["tools"] = tools
        transient = (
            litellm.RateLimitError,
            litellm.InternalServerError,
            litellm.ServiceUnavailableError,
            litellm.APIConnectionError,
            litellm.Timeout,
            litellm.BadGatewayError,
        )
        tally = Tally()
        try:
            response = await self._retries.call(
                lambda: litellm.acompletion(**kwargs),
                transient=lambda exc: isinstance(exc, transient),
                tally=tally,
            )
        except Exception as exc:
            redact = self._redactor.with_values(secret_options(options))
            raise failed(skill, exc, tally.attempts, redact) from None
        latency = tally.latency_ms()
        choice = response.choices[0]
        usage = getattr(response, "usage", None)
        return ModelReply(
            text=choice.message.content or None,
            tool_calls=tool_calls(choice.message.tool_calls),
            tokens_in=int(getattr(usage, "prompt_tokens", 0) or 0),
            tokens_out=int(getattr(usage, "completion_tokens", 0) or 0),
            cost_usd=_cost(litellm, response),
            latency_ms=latency,
            model=skill.model,
            attempts=tally.attempts,
            raw_finish=getattr(choice, "finish_reason", None),
        )


def _cost(litellm: Any, response: Any) -> float | None:
    """The call's price in USD, or None when litellm does not know the model's price (tokens
    still count). litellm prices every response itself before returning it; pricing it again
    costs milliseconds per call (an unknown model is looked up under many spellings)."""
    hidden = getattr(response, "_hidden_params", None) or {}
    if "response_cost" in hidden:
        cost = hidden["response_cost"]
        return float(cost) if cost is not None else None
    try:
        return float(litellm.completion_cost(completion_response=response))
    except Exception:
        return None
