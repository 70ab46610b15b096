"""Each coding agent's hook, in its own words: what it writes on stdin, and how it wants to
be told allow or deny.

A host is a small table, not a class tree: its name, how to read its payload into a
`HookCall` (the tool, its input, where and for which session), and how to print a
`Verdict` as the host documents it. `pizzabot hook` (and the server's hook endpoint) does the asking; this module only
translates, so a host that changes its format changes here and nowhere else.

    claude-code  PreToolUse (permissionDecision) and PermissionRequest (decision.behavior)
    codex        PermissionRequest (decision.behavior); cannot rewrite a call
    gemini       BeforeTool: {"decision": "allow"}, or exit 2 with the reason on stderr
    cursor       beforeShellExecution and preToolUse (permission); cannot rewrite a call
    copilot      preToolUse (permissionDecision, modifiedArgs)

Every answer is explicit: a host that reads silence as "go ahead" never gets silence.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

__all__ = [
    "HOSTS",
    "HookAnswer",
    "HookCall",
    "HookInputError",
    "Host",
    "Verdict",
    "unreadable_call",
]

#: Shell tools by the name each host gives them: their `command` is what a person reads.
_SHELL_TOOLS = frozenset({"Bash", "run_shell_command", "bash", "powershell", "Shell"})
#: The one tool name every host's shell command is asked under, so one rule set covers all.
SHELL_TOOL = "shell.run"


class HookInputError(ValueError):
    """The host's payload is not what its documentation says: the call is denied."""


@dataclass(frozen=True)
class HookCall:
    """One tool call a host asks about, in the host's own terms. `call_id` is the host's id
    of this very call (Claude Code's tool_use_id), the same when it is asked again."""

    host: str
    event: str
    tool: str
    args: dict[str, Any]
    cwd: str | None = None
    session: str | None = None
    call_id: str | None = None

    @property
    def shell(self) -> bool:
        return self.tool in _SHELL_TOOLS and isinstance(self.args.get("command"), str)


@dataclass(frozen=True)
class Verdict:
    """What a person (or the rules, or a failure) decided. `args` is set for an edit;
    `defer`: no one decided yet, and the host may hold the call to ask again later."""

    allow: bool
    reason: str
    args: dict[str, Any] | None = None
    defer: bool = False


@dataclass(frozen=True)
class HookAnswer:
    """What the hook prints and how it exits."""

    stdout: str = ""
    stderr: str = ""
    code: int = 0


@dataclass(frozen=True)
class Host:
    """One coding agent: its label on cards, its default hook time-out (seconds), whether it
    can run a call with edited input, how to read its payload and how to answer."""

    name: str
    label: str
    default_timeout: float
    rewrites: bool
    #: The events whose answer may be "not yet, ask again later" (`Verdict.defer`).
    defers: frozenset[str]
    read: Callable[[Mapping[str, Any]], HookCall]
    answer: Callable[[HookCall, Verdict], HookAnswer]


def _text(payload: Mapping[str, Any], *names: str) -> str | None:
    for name in names:
        value = payload.get(name)
        if isinstance(value, str) and value:
            return value
    return None


def _object(value: Any, what: str) -> dict[str, Any]:
    """A tool's input: an object, or (Copilot, Cursor's MCP hooks) a JSON text of one."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            raise HookInputError(f"{what} is not JSON") from None
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise HookInputError(f"{what} is not an object")
    return value


def _tool_call(host: str, payload: Mapping[str, Any], *, default_event: str) -> HookCall:
    """The payload most hosts share: tool_name, tool_input, cwd, session_id."""
    tool = _text(payload, "tool_name", "toolName")
    if tool is None:
        raise HookInputError("no tool_name in the hook's input")
    raw = payload["tool_input"] if "tool_input" in payload else payload.get("toolArgs")
    return HookCall(
        host=host,
        event=_text(payload, "hook_event_name") or default_event,
        tool=tool,
        args=_object(raw, "tool_input"),
        cwd=_text(payload, "cwd"),
        session=_text(payload, "session_id", "sessionId", "conversation_id"),
        call_id=_text(payload, "tool_use_id"),
    )


def _edited_elsewhere(verdict: Verdict) -> Verdict:
    """An edit for a host that cannot run a call with other input: a deny that hands the
    agent the person's version, so it can make that call instead (and is asked again)."""
    if not verdict.allow or verdict.args is None:
        return verdict
    changed = verdict.args.get("command", verdict.args)
    shown = changed if isinstance(changed, str) else json.dumps(changed, ensure_ascii=False)
    return Verdict(
        allow=False,
        reason=f"{verdict.reason}, changed to: {shown} — run that instead if it is still needed.",
    )


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


# -- Claude Code ---------------------------------------------------------------------------


def _claude_read(payload: Mapping[str, Any]) -> HookCall:
    return _tool_call("claude-code", payload, default_event="PreToolUse")


def _claude_answer(call: HookCall, verdict: Verdict) -> HookAnswer:
    if call.event == "PermissionRequest":
        decision: dict[str, Any] = {"behavior": "allow" if verdict.allow else "deny"}
        if verdict.allow and verdict.args is not None:
            decision["updatedInput"] = verdict.args
        if not verdict.allow:
            decision["message"] = verdict.reason
        out = {"hookEventName": "PermissionRequest", "decision": decision}
        return HookAnswer(_json({"hookSpecificOutput": out}))
    decided = "allow" if verdict.allow else "deny"
    pre: dict[str, Any] = {
        "hookEventName": "PreToolUse",
        # defer: a headless (-p) session stops and holds the call; resumed, it asks again.
        "permissionDecision": "defer" if verdict.defer else decided,
        "permissionDecisionReason": verdict.reason,
    }
    if verdict.allow and verdict.args is not None:
        pre["updatedInput"] = verdict.args
    return HookAnswer(_json({"hookSpecificOutput": pre}))


# -- Codex ---------------------------------------------------------------------------------


def _codex_read(payload: Mapping[str, Any]) -> HookCall:
    return _tool_call("codex", payload, default_event="PermissionRequest")


def _codex_answer(call: HookCall, verdict: Verdict) -> HookAnswer:
    verdict = _edited_elsewhere(verdict)
    decision: dict[str, Any] = {"behavior": "allow" if verdict.allow else "deny"}
    if not verdict.allow:
        decision["message"] = verdict.reason
    out = {"hookEventName": "PermissionRequest", "decision": decision}
    return HookAnswer(_json({"hookSpecificOutput": out}))


# -- Gemini CLI ----------------------------------------------------------------------------


def _gemini_read(payload: Mapping[str, Any]) -> HookCall:
    return _tool_call("gemini", payload, default_event="BeforeTool")


def _gemini_answer(call: HookCall, verdict: Verdict) -> HookAnswer:
    if not verdict.allow:
        # Exit 2 blocks the tool; stderr is the reason the agent reads. Nothing on stdout.
        return HookAnswer(stderr=verdict.reason + "\n", code=2)
    out: dict[str, Any] = {"decision": "allow", "reason": verdict.reason}
    if verdict.args is not None:
        out["hookSpecificOutput"] = {"tool_input": verdict.args}
    return HookAnswer(_json(out))


# -- Cursor --------------------------------------------------------------------------------


def _cursor_read(payload: Mapping[str, Any]) -> HookCall:
    event = _text(payload, "hook_event_name") or "preToolUse"
    roots = payload.get("workspace_roots")
    root = roots[0] if isinstance(roots, list) and roots and isinstance(roots[0], str) else None
    if event == "beforeShellExecution":
        command = _text(payload, "command")
        if command is None:
            raise HookInputError("no command in Cursor's beforeShellExecution input")
        return HookCall(
            host="cursor",
            event=event,
            tool="Shell",
            args={"command": command},
            cwd=_text(payload, "cwd") or root,
            session=_text(payload, "conversation_id"),
        )
    call = _tool_call("cursor", payload, default_event=event)
    return call if call.cwd else replace(call, cwd=root)


def _cursor_answer(call: HookCall, verdict: Verdict) -> HookAnswer:
    verdict = _edited_elsewhere(verdict)
    out = {
        "permission": "allow" if verdict.allow else "deny",
        "user_message": verdict.reason,
        "agent_message": verdict.reason,
    }
    return HookAnswer(_json(out))


# -- GitHub Copilot CLI --------------------------------------------------------------------


def _copilot_read(payload: Mapping[str, Any]) -> HookCall:
    return _tool_call("copilot", payload, default_event="preToolUse")


def _copilot_answer(call: HookCall, verdict: Verdict) -> HookAnswer:
    out: dict[str, Any] = {
        "permissionDecision": "allow" if verdict.allow else "deny",
        "permissionDecisionReason": verdict.reason,
    }
    if verdict.allow and verdict.args is not None:
        out["modifiedArgs"] = verdict.args
    return HookAnswer(_json(out))


HOSTS: dict[str, Host] = {
    h.name: h
    for h in (
        Host(
            "claude-code",
            "Claude Code",
            600,
            True,
            frozenset({"PreToolUse"}),
            _claude_read,
            _claude_answer,
        ),
        Host("codex", "Codex", 600, False, frozenset(), _codex_read, _codex_answer),
        Host("gemini", "Gemini CLI", 60, True, frozenset(), _gemini_read, _gemini_answer),
        Host("cursor", "Cursor", 60, False, frozenset(), _cursor_read, _cursor_answer),
        Host("copilot", "Copilot CLI", 30, True, frozenset(), _copilot_read, _copilot_answer),
    )
}


def unreadable_call(host: Host, raw: object) -> HookCall:
    """Enough of a payload that could not be read to answer in the right shape (the event's
    name, where it has one): the answer is a deny."""
    event = raw.get("hook_event_name") if isinstance(raw, dict) else None
    return HookCall(host=host.name, event=event if isinstance(event, str) else "", tool="", args={})
