"""Claude Code's `http` hooks: `POST /api/hooks/claude-code` takes the hook input Claude Code
would write on a command hook's stdin, asks a person, and answers Claude Code's own allow or
deny, as `pizzabot hook claude-code` prints it (`pizzabot.client.hooks`).

    POST /api/hooks/claude-code?skill=approvals&timeout=600
         (Authorization: Bearer <an ask token>)  PreToolUse or PermissionRequest input
         → 200 {"hookSpecificOutput": {... allow or deny, the reason, an edit's input}}

Claude Code reads a non-2xx answer, a refused connection or a time-out of an `http` hook as
a non-blocking error, and on PreToolUse the call then goes ahead. So once the token is
accepted, every answer here is a 200 with an explicit allow or deny: input it cannot read, a
token that could also decide, a refused request, the kill switch and no decision in time
all deny, saying which. The answer comes a margin before `timeout` (the `timeout` Claude
Code's settings give the hook), and the card says until when an answer counts. Before the
token is accepted nothing can be answered for the caller (401); `pizzabot hook install
claude-code --http` therefore installs the hook on PermissionRequest, which Claude Code does
not let through when its hook fails.

The working directory a hook names is on the agent's machine: the server shows it and never
reads it (no repository is looked up from it, unlike the command hook, which runs there).
"""

from __future__ import annotations

import logging
import time
from typing import Any

from fastapi import APIRouter, Depends, HTTPException, Query, Request
from fastapi.responses import Response
from pydantic import BaseModel

from pizzabot.agent.argforms import loads_body
from pizzabot.agent.policy.principal import Principal, Scope
from pizzabot.channels.http.deps import ApiDeps, Deps
from pizzabot.channels.http.schema import errors
from pizzabot.channels.http.scopes import ASKING, caller
from pizzabot.channels.requests_wire import new_request, wire_state
from pizzabot.client.hooks import (
    HOSTS,
    HookCall,
    HookInputError,
    Host,
    Verdict,
    hook_request,
    margin,
    unreadable_call,
    verdict_of,
)
from pizzabot.client.wire import RequestBody

__all__ = ["router"]

log = logging.getLogger(__name__)

#: The hosts that post their hooks over HTTP; the others run `pizzabot hook HOST`.
_POSTING = ("claude-code",)

router = APIRouter(
    prefix="/api/hooks",
    dependencies=[Depends(caller)],
    responses=errors(401, 403, 404, 422),
    tags=["hooks"],
)

_BODY = {
    "requestBody": {
        "required": True,
        "description": "The hook input, as Claude Code sends it (PreToolUse, PermissionRequest)",
        "content": {"application/json": {"schema": {"type": "object"}}},
    }
}


class HookDecision(BaseModel):
    """Claude Code's hook answer: `hookSpecificOutput` with the event's name and its allow or
    deny (PreToolUse: `permissionDecision`, its reason and an edit's `updatedInput`;
    PermissionRequest: `decision.behavior`, its message and `updatedInput`)."""

    hookSpecificOutput: dict[str, Any]


@router.post(
    "/{host}",
    summary="Ask a person about a coding agent's tool call; answer its allow or deny",
    responses={200: {"model": HookDecision, "description": "The host's own answer: allow or deny"}},
    openapi_extra=_BODY,
)
async def ask(
    host: str,
    request: Request,
    deps: Deps,
    skill: str = Query("approvals", min_length=1, max_length=200),
    timeout: float = Query(600.0, ge=10, le=86400, description="The hook's time-out, seconds"),
    who: Principal = ASKING,
) -> Response:
    if host not in _POSTING:
        raise HTTPException(
            404, f"no hook endpoint for {host!r}: {', '.join(_POSTING)} posts its hooks here"
        )
    the_host = HOSTS[host]
    started = time.monotonic()
    raw: object = None
    try:
        raw = loads_body(await request.body())
        if not isinstance(raw, dict):
            raise HookInputError("not a JSON object")
        call = the_host.read(raw)
    except (ValueError, RecursionError, HookInputError) as exc:
        why = f"Pizza Bot could not read {the_host.label}'s hook input ({exc})"
        return _answer(the_host, unreadable_call(the_host, raw), _blocked(why))
    wait = timeout - margin(timeout)
    try:
        verdict = await _decide(deps, the_host, call, skill=skill, wait=wait, who=who, t0=started)
    except Exception as exc:  # fail closed: whatever went wrong, the call does not run
        log.warning("hook %s: %s", host, type(exc).__name__)
        verdict = _blocked(f"Pizza Bot could not ask ({_words(exc)})")
    return _answer(the_host, call, verdict)


async def _decide(
    deps: ApiDeps, host: Host, call: HookCall, *, skill: str, wait: float, who: Principal, t0: float
) -> Verdict:
    if who.scope.covers(Scope.DECIDE):
        return _blocked(
            "The hook asks with a token that may also decide, so the agent could approve its "
            f"own calls: give it an ask token (`pizzabot hook install {host.name} --http`)"
        )
    fields = hook_request(host, call, wait=wait, local=False)
    body = RequestBody(
        skill=skill,
        title=fields.title,
        tool=fields.tool,
        args=fields.args,
        schema=fields.schema,
        description=fields.description,
        timeout=max(1.0, wait),
    )
    state, _ = await deps.requests.create(new_request(body), by=who)
    left = wait - (time.monotonic() - t0)
    if state.pending and left > 0:
        state = await deps.requests.wait(state.id, left, by=who)
    return verdict_of(wire_state(state), wait)


def _blocked(why: str) -> Verdict:
    return Verdict(False, f"{why}, so the call is blocked.")


def _words(exc: Exception) -> str:
    """An error in the words it was raised with; never a traceback or a repr of its parts."""
    text = str(exc)
    return text.splitlines()[0][:500] if text else type(exc).__name__


def _answer(host: Host, call: HookCall, verdict: Verdict) -> Response:
    answer = host.answer(call, verdict)
    return Response(answer.stdout, status_code=200, media_type="application/json")
