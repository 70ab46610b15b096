"""Webhooks: `POST /hooks/{name}` starts a run of the skill that declares the hook.

The request is checked, recorded as a run and answered at once (202 with the run id); the
engine does the work later. Checks, in order, each refusing with no run:

- 404 no skill declares a hook of that name;
- 413 the body is larger than `webhook_max_bytes`;
- 401 `X-Pizzabot-Timestamp` (Unix seconds) is missing or more than `webhook_tolerance`
  seconds away from the server's clock;
- 401 `X-Pizzabot-Signature` is not `sha256=` + hex HMAC-SHA256 of `timestamp + "." + body`
  keyed with the secret in the environment variable the hook's `secret_env` names;
- 409 the kill switch is on.

An `Idempotency-Key` header makes a retried delivery return the first delivery's run.
The secret is read here, in `bot/`, and never logged.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import JSONResponse

from agent.skills import Hook, Skill, SkillBook
from bot.services import Services
from bot.settings import environment

log = logging.getLogger(__name__)

TIMESTAMP_HEADER = "X-Pizzabot-Timestamp"
SIGNATURE_HEADER = "X-Pizzabot-Signature"
IDEMPOTENCY_HEADER = "Idempotency-Key"


def sign(secret: str, timestamp: str, body: bytes) -> str:
    """The signature header value a sender computes: "sha256=<hex>"."""
    mac = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256)
    return "sha256=" + mac.hexdigest()


def find_hook(skills: SkillBook, name: str) -> tuple[Skill, Hook] | None:
    for skill in skills.all():
        for hook in skill.hooks:
            if hook.name == name:
                return skill, hook
    return None


async def read_limited(request: Request, limit: int) -> bytes:
    """The body, refused with 413 as soon as it is known to exceed `limit` bytes."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise HTTPException(413, f"the body is larger than {limit} bytes")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise HTTPException(413, f"the body is larger than {limit} bytes")
    return bytes(body)


def check_signature(
    secret: str, headers: Any, body: bytes, *, now: float, tolerance: float
) -> None:
    stamp = (headers.get(TIMESTAMP_HEADER) or "").strip()
    if not stamp.isdigit():
        raise HTTPException(401, f"missing or malformed {TIMESTAMP_HEADER} (Unix seconds)")
    if abs(now - int(stamp)) > tolerance:
        raise HTTPException(
            401, f"stale {TIMESTAMP_HEADER}: more than {tolerance:.0f}s from the server's clock"
        )
    given = (headers.get(SIGNATURE_HEADER) or "").strip()
    if not hmac.compare_digest(given.encode(), sign(secret, stamp, body).encode()):
        raise HTTPException(401, f"bad {SIGNATURE_HEADER}")


def run_input(body: bytes, content_type: str) -> str:
    """The run's input: JSON as sent, a form as a JSON object, other text as it is."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise HTTPException(422, "the body is not UTF-8 text") from None
    kind = content_type.split(";")[0].strip().lower()
    if kind == "application/x-www-form-urlencoded":
        fields = parse_qs(text, keep_blank_values=True)
        form = {k: v[0] if len(v) == 1 else v for k, v in fields.items()}
        return json.dumps(form, ensure_ascii=False, indent=2)
    if kind == "application/json" or kind.endswith("+json"):
        try:
            json.loads(text)
        except ValueError:
            raise HTTPException(422, "the body is not valid JSON") from None
        return text
    if kind.startswith("multipart/"):
        raise HTTPException(415, "send JSON or application/x-www-form-urlencoded")
    return text


def idempotency_key(name: str, key: str) -> str:
    full = f"hook:{name}:{key}"
    if len(full) <= 300:  # the runs table's limit
        return full
    return f"hook:{name}:sha256:{hashlib.sha256(key.encode()).hexdigest()}"


def router(
    *, max_bytes: int, tolerance: float, clock: Callable[[], float] = time.time
) -> APIRouter:
    hooks = APIRouter(tags=["webhooks"])

    @hooks.post("/hooks/{name}", status_code=202)
    async def receive(name: str, request: Request) -> JSONResponse:
        svc: Services = request.app.state.services
        found = find_hook(svc.ctx.skills, name)
        if found is None:
            raise HTTPException(404, f"no hook named {name!r}")
        skill, hook = found
        secret = environment().get(hook.secret_env, "")
        if not secret:
            log.error("hook %s: the environment variable %s is not set", name, hook.secret_env)
            raise HTTPException(503, f"hook {name!r} has no secret configured on the server")
        body = await read_limited(request, max_bytes)
        check_signature(secret, request.headers, body, now=clock(), tolerance=tolerance)
        text = run_input(body, request.headers.get("content-type", ""))
        key = (request.headers.get(IDEMPOTENCY_HEADER) or "").strip()
        run = await svc.runs.start(
            skill.name,
            text,
            trigger=f"hook:{name}",
            actor=f"hook:{name}",
            idempotency_key=idempotency_key(name, key) if key else None,
        )
        return JSONResponse(
            {"run_id": run.id, "skill": run.skill, "status": str(run.status)},
            status_code=202,
            headers={"Location": f"/api/runs/{run.id}"},
        )

    return hooks
