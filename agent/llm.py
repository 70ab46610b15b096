"""Model calls through litellm, with retries and backoff for provider trouble.

litellm costs seconds to import, so it is imported on the first call, never at module
import: the server must answer `/healthz` at once. Transient provider errors (429, 5xx,
timeouts, dropped connections) are retried with exponential backoff (tenacity); after the
last try the run fails with a readable reason — with the call's API key and any other
secret redacted, since a provider's error may echo the key and the reason is stored and shown.
"""

from __future__ import annotations

import asyncio
import gc
import os
import re
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt, wait_exponential

from agent.argforms import loads_json
from agent.errors import ModelError, UserError
from agent.redaction import Redactor
from agent.skills import Skill

#: Model options whose string values are secrets: what a provider's error may echo.
_SECRET_OPTION = re.compile(r"key|secret|token|password|credential", re.IGNORECASE)


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


#: Whether the objects litellm's import made were moved out of the garbage collector's sight.
_frozen = False


def import_litellm() -> Any:
    global _frozen
    # The bundled price map, not a download: no network access is tried at import.
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    litellm.suppress_debug_info = True
    if not _frozen:
        _frozen = True
        # litellm's import leaves ~450,000 objects that live as long as the process; a full
        # collection walks them all (~230 ms on the event loop, every so often). Frozen, they
        # are never walked; garbage still goes by reference counting and younger collections.
        gc.freeze()
    return litellm


def _transient(exc: BaseException) -> bool:
    litellm = import_litellm()
    transient = (
        litellm.RateLimitError,
        litellm.InternalServerError,
        litellm.ServiceUnavailableError,
        litellm.APIConnectionError,
        litellm.Timeout,
        litellm.BadGatewayError,
    )
    return isinstance(exc, transient)


def _describe(exc: BaseException, redact: Callable[[str], str]) -> str:
    status = getattr(exc, "status_code", None)
    # Redacted before it is cut: a key cut in half no longer matches its value.
    whole = redact(str(exc))
    text = whole.splitlines()[0] if whole else type(exc).__name__
    return f"{type(exc).__name__}{f' (HTTP {status})' if status else ''}: {text[:300]}"


class LiteLLMClient:
    """The one model route: litellm. `env` resolves a skill's `api_key_env`; `redactor`
    knows the server's other secrets (the call's own key is added to it per call)."""

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
        self._attempts = attempts
        self._backoff = (backoff_min, backoff_max)
        self._timeout = timeout
        self._sleep = sleep

    def _options(self, skill: Skill) -> dict[str, Any]:
        options = dict(skill.model_options)
        key_env = options.pop("api_key_env", None)
        if key_env:
            if key_env not in self._env:
                raise UserError(
                    f"skill {skill.name!r}: environment variable {key_env} (api_key_env) is not set"
                )
            options["api_key"] = self._env[key_env]
        options.setdefault("timeout", self._timeout)
        # The engine retries with its own backoff; the OpenAI SDK must not retry underneath it.
        options.setdefault("max_retries", 0)
        return options

    async def complete(
        self, skill: Skill, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
    ) -> ModelReply:
        if skill.model is None:
            raise UserError(f"skill {skill.name!r} is inbox-only: it has no model to call")
        if self._prepared:
            litellm = import_litellm()
        else:
            # Seconds of import: off the event loop, so the worker's heartbeat keeps the lease
            # (and the server answers) meanwhile; it may be importing on another thread already.
            litellm = await asyncio.to_thread(import_litellm)
            if self._on_import is not None:
                self._on_import(litellm)
            self._prepared = True
        options = self._options(skill)
        kwargs: dict[str, Any] = {"model": skill.model, "messages": messages, **options}
        if tools:
            kwargs["tools"] = tools
        retry_kwargs: dict[str, Any] = {}
        if self._sleep is not None:
            retry_kwargs["sleep"] = self._sleep
        attempts = 0
        started = time.perf_counter()
        try:
            async for attempt in AsyncRetrying(
                stop=stop_after_attempt(self._attempts),
                wait=wait_exponential(min=self._backoff[0], max=self._backoff[1]),
                retry=retry_if_exception(_transient),
                reraise=True,
                **retry_kwargs,
            ):
                with attempt:
                    attempts += 1
                    started = time.perf_counter()
                    response = await litellm.acompletion(**kwargs)
        except Exception as exc:
            tries = f" after {attempts} attempts" if attempts > 1 else ""
            redact = self._redactor.with_values(_secret_options(options))
            # Not chained: a logged traceback of the cause would print the unredacted text.
            raise ModelError(
                f"model {skill.model} failed{tries}: {_describe(exc, redact)}"
            ) from None
        latency = (time.perf_counter() - started) * 1000
        return _reply(litellm, response, skill.model, latency, attempts)


def _secret_options(options: Mapping[str, Any]) -> list[str]:
    found: list[str] = []
    for key, value in options.items():
        if isinstance(value, str) and _SECRET_OPTION.search(key):
            found.append(value)
        elif isinstance(value, Mapping):  # extra_headers and the like
            found.extend(_secret_options(value))
    return found


def _reply(litellm: Any, response: Any, model: str, latency: float, attempts: int) -> ModelReply:
    choice = response.choices[0]
    message = choice.message
    calls: list[ToolCall] = []
    for i, tc in enumerate(message.tool_calls or []):
        raw = tc.function.arguments or "{}"
        try:
            # Numbers bounded: a huge literal would block the loop or fail every later step.
            args = loads_json(raw) if isinstance(raw, str) else dict(raw)
        except ValueError:
            args = {"_unparsed": raw}
        calls.append(
            ToolCall(
                id=tc.id or f"call_{i}",
                name=tc.function.name,
                arguments=args if isinstance(args, dict) else {"value": args},
            )
        )
    usage = getattr(response, "usage", None)
    tokens_in = int(getattr(usage, "prompt_tokens", 0) or 0)
    tokens_out = int(getattr(usage, "completion_tokens", 0) or 0)
    return ModelReply(
        text=message.content or None,
        tool_calls=calls,
        tokens_in=tokens_in,
        tokens_out=tokens_out,
        cost_usd=_cost(litellm, response),
        latency_ms=latency,
        model=model,
        attempts=attempts,
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
