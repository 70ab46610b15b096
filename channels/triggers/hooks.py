r"""Webhooks: `POST /hooks/{name}` starts a run of the skill that declares the hook.

The request is checked, recorded as a run and answered at once (202 with the run id); the
engine does the work later. Checks, in order, each refusing with no run:

- 404 no skill declares a hook of that name;
- 413 the body is larger than `webhook_max_bytes`;
- 401 `X-Pizzabot-Timestamp` (Unix seconds) is missing or more than `webhook_tolerance`
  seconds away from the server's clock;
- 401 `X-Pizzabot-Signature` is not the signature of this request (below);
- 400 / 415 / 422 the body cannot be read (JSON nested too deeply; multipart; not JSON,
  not UTF-8);
- 409 the signature was accepted before: a captured request sent again is a replay;
- 409 the kill switch is on;
- 409 the `Idempotency-Key` was used with another body.

The signature is `sha256=` + the hex HMAC-SHA256, keyed with the secret in the environment
variable the hook's `secret_env` names, of the bytes

    timestamp + "\n" + idempotency_key + "\n" + body

where `timestamp` is the `X-Pizzabot-Timestamp` value, `idempotency_key` the
`Idempotency-Key` header with surrounding spaces removed (empty when there is none; a header
value cannot hold a line break, so the three parts cannot be shifted into each other) and
`body` the exact bytes sent. A request without an `Idempotency-Key` may still be signed the
older way, over `timestamp + "." + body`; one with a key must be signed with the key.

The server signs too: a request's callback (`pizzabot.channels.callback`) is posted with the same
headers, and one secret may serve a skill's hooks and its callbacks. So the two must never be
taken for each other, or a captured callback (its key is the request's id) would start a run
here. A callback's signed bytes begin with a label, ``pizzabot-callback-v1`` LF; a webhook's
begin with its timestamp, which must be ASCII digits, so no callback signature is a webhook
signature, nor the other way round. Webhooks keep their unlabelled form, so every sender
that signs today goes on working.

Each accepted signature is remembered in the database until its timestamp is stale everywhere,
so a request is accepted once however many servers share the database. A retried delivery is
signed again (a new timestamp); with the same `Idempotency-Key` and the same body it gets the
first delivery's run. The secret is read from the environment by the composition root
(`HookDeps.secret`), and never logged.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated, Any
from urllib.parse import parse_qs

from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from pizzabot.agent.policy.principal import Principal
from pizzabot.agent.runs import Runs
from pizzabot.agent.schedules import HookSignatures
from pizzabot.agent.skills import Hook, Skill, SkillBook
from pizzabot.channels.http.schema import Error, errors

log = logging.getLogger(__name__)

TIMESTAMP_HEADER = "X-Pizzabot-Timestamp"
SIGNATURE_HEADER = "X-Pizzabot-Signature"
IDEMPOTENCY_HEADER = "Idempotency-Key"
#: How long past its timestamp's own window a signature is remembered: servers sharing the
#: database may disagree about the time by up to this much.
CLOCK_MARGIN = 300.0


def signed_bytes(timestamp: str, body: bytes, key: str = "") -> bytes:
    """What the signature covers: ``timestamp LF idempotency-key LF body``."""
    # Latin-1 gives back the header's bytes as sent (Starlette decodes headers with it).
    return timestamp.encode() + b"\n" + key.encode("latin-1") + b"\n" + body


def sign(secret: str, timestamp: str, body: bytes, *, key: str = "") -> str:
    """The signature header value a sender computes: "sha256=<hex>"."""
    mac = hmac.new(secret.encode(), signed_bytes(timestamp, body, key), hashlib.sha256)
    return "sha256=" + mac.hexdigest()


def sign_without_key(secret: str, timestamp: str, body: bytes) -> str:
    """The older signature, over ``timestamp "." body``: accepted only without a key."""
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
    secret: str, headers: Any, body: bytes, *, key: str, now: float, tolerance: float
) -> tuple[int, str]:
    """The request's timestamp and signature (hex), once both are right; else 401."""
    stamp = (headers.get(TIMESTAMP_HEADER) or "").strip()
    # ASCII digits, and few of them: int() refuses other digits and very long numbers. The
    # signed bytes then begin with a digit, which a callback's (a label first) never do.
    if not (stamp.isascii() and stamp.isdigit() and len(stamp) <= 12):
        raise HTTPException(401, f"missing or malformed {TIMESTAMP_HEADER} (Unix seconds)")
    if abs(now - int(stamp)) > tolerance:
        raise HTTPException(
            401, f"stale {TIMESTAMP_HEADER}: more than {tolerance:.0f}s from the server's clock"
        )
    given = (headers.get(SIGNATURE_HEADER) or "").strip().encode()
    expected = [sign(secret, stamp, body, key=key)]
    if not key:
        expected.append(sign_without_key(secret, stamp, body))
    # Every candidate is compared, so the time taken says nothing about which one matched.
    matches = [hmac.compare_digest(given, e.encode()) for e in expected]
    if not any(matches):
        raise HTTPException(401, f"bad {SIGNATURE_HEADER}")
    return int(stamp), given.decode().removeprefix("sha256=")


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
        except RecursionError:
            raise HTTPException(400, "the JSON body is nested too deeply") from None
        return text
    if kind.startswith("multipart/"):
        raise HTTPException(415, "send JSON or application/x-www-form-urlencoded")
    return text


def idempotency_key(name: str, key: str) -> str:
    full = f"hook:{name}:{key}"
    if len(full) <= 300:  # the runs table's limit
        return full
    return f"hook:{name}:sha256:{hashlib.sha256(key.encode()).hexdigest()}"


@dataclass(frozen=True)
class HookDeps:
    """What the receiver needs from the running server (set on the app's state)."""

    runs: Runs
    skills: SkillBook
    signatures: HookSignatures
    #: The secret in the environment variable a hook's `secret_env` names ("" when unset).
    secret: Callable[[str], str]
    max_bytes: int
    tolerance: float
    clock: Callable[[], float] = time.time


async def hook_deps(request: Request) -> HookDeps:
    deps = getattr(request.app.state, "hooks", None)
    if not isinstance(deps, HookDeps):
        raise HTTPException(503, "the server is still starting")
    return deps


router = APIRouter(tags=["webhooks"])


class HookAccepted(BaseModel):
    """The run a webhook started (or the run the same `Idempotency-Key` started before)."""

    run_id: str
    skill: str
    status: str


_SIGNED = (
    "No bearer token: the request is signed with the secret in the environment variable "
    "the hook's `secret_env` names. `X-Pizzabot-Signature` is `sha256=` + the hex "
    "HMAC-SHA256 of `timestamp LF idempotency-key LF body` (the `X-Pizzabot-Timestamp` "
    "value, the `Idempotency-Key` header or nothing, the exact body bytes). The body is the "
    "run's input: JSON as sent, a form as a JSON object, other text as it is. Answers 202 at "
    "once with the run; the run does the work later."
)
_HOOK_HEADERS = [
    {
        "name": TIMESTAMP_HEADER,
        "in": "header",
        "required": True,
        "description": "Unix seconds, within the server's tolerance (default 5 minutes)",
        "schema": {"type": "string", "pattern": "^[0-9]{1,12}$"},
    },
    {
        "name": SIGNATURE_HEADER,
        "in": "header",
        "required": True,
        "description": "sha256=<hex HMAC-SHA256 of the signed bytes>",
        "schema": {"type": "string", "pattern": "^sha256=[0-9a-f]{64}$"},
    },
    {
        "name": IDEMPOTENCY_HEADER,
        "in": "header",
        "required": False,
        "description": "A retried delivery with the same key and body gets the first run",
        "schema": {"type": "string", "maxLength": 200},
    },
]
_ANY_BODY: dict[str, Any] = {"schema": {}}


@router.post(
    "/hooks/{name}",
    status_code=202,
    summary="Start a run of the skill that declares this webhook",
    description=_SIGNED,
    response_model=HookAccepted,
    responses={
        **errors(400, 404, 409, 413, 415, 422, 503),
        401: {"model": Error, "description": "Stale or missing timestamp, or a bad signature"},
    },
    openapi_extra={
        "security": [],
        "parameters": _HOOK_HEADERS,
        "requestBody": {
            "required": False,
            "content": {
                "application/json": _ANY_BODY,
                "application/x-www-form-urlencoded": _ANY_BODY,
                "text/plain": {"schema": {"type": "string"}},
            },
        },
    },
)
async def receive(
    name: str, request: Request, deps: Annotated[HookDeps, Depends(hook_deps)]
) -> JSONResponse:
    found = find_hook(deps.skills, name)
    if found is None:
        raise HTTPException(404, f"no hook named {name!r}")
    skill, hook = found
    secret = deps.secret(hook.secret_env)
    if not secret:
        log.error("hook %s: the environment variable %s is not set", name, hook.secret_env)
        raise HTTPException(503, f"hook {name!r} has no secret configured on the server")
    body = await read_limited(request, deps.max_bytes)
    key = (request.headers.get(IDEMPOTENCY_HEADER) or "").strip()
    now = deps.clock()
    stamp, signature = check_signature(
        secret, request.headers, body, key=key, now=now, tolerance=deps.tolerance
    )
    text = run_input(body, request.headers.get("content-type", ""))
    if not await deps.signatures.accept_signature(
        signature,
        hook=name,
        expires_at=_utc(stamp + deps.tolerance + CLOCK_MARGIN),
        now=_utc(now),
    ):
        raise HTTPException(409, "this signature was accepted before: sign each delivery anew")
    try:
        run = await deps.runs.start(
            skill.name,
            text,
            trigger=f"hook:{name}",
            by=Principal.system("hook", f"hook:{name}"),
            idempotency_key=idempotency_key(name, key) if key else None,
        )
        if run.skill != skill.name or run.input != text:
            raise HTTPException(
                409,
                f"this {IDEMPOTENCY_HEADER} was used with another request body; "
                "use a new key for a new request",
            )
    except Exception:
        # Refused after all: the same signed request may be sent again (say, once the kill
        # switch is lifted) and be judged afresh.
        await deps.signatures.forget_signature(signature)
        raise
    return JSONResponse(
        {"run_id": run.id, "skill": run.skill, "status": str(run.status)},
        status_code=202,
        headers={"Location": f"/api/runs/{run.id}"},
    )


def _utc(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)
