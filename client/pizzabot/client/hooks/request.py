"""A coding agent's tool call as a request a person can judge from the card alone.

The card must say who asks (the host and its session; the server adds the token's name),
where (the working directory, the repository and branch when there is one), and what: the
command as a code line, or for a file edit the diff. The request's `description` carries
that, and its title is the command itself, so a list of items reads as a list of commands.

Every shell command is asked under one tool name (`shell.run`) whatever the host calls
its shell tool, so one rule set in the skill covers every host. Its arguments are the
host's tool input as sent, every field kept: a rule reads `command`, and an edit hands the
host back its own input with the person's changes. The schema that gives the card its edit
form leaves the other fields open (`additionalProperties`), so nothing a host adds is refused.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from pizzabot.client.hooks.hosts import SHELL_TOOL, HookCall, Host

__all__ = ["SHELL_SCHEMA", "HookRequest", "hook_request", "repository"]

#: The edit form of a shell command: the command; every other field the host sends is kept.
SHELL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"command": {"type": "string", "title": "Command", "minLength": 1}},
    "required": ["command"],
    "additionalProperties": True,
}
#: Longest part of a file's new content or diff shown on a card.
_MAX_SHOWN = 3000
_MAX_TITLE = 200


@dataclass(frozen=True)
class HookRequest:
    """The request's fields, for `pizzabot.client.Inbox.request`."""

    title: str
    tool: str
    args: dict[str, Any]
    schema: dict[str, Any] | None
    description: str


def _one_line(text: str, limit: int) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def repository(cwd: str | None) -> tuple[str, str | None] | None:
    """The git repository holding `cwd` (its folder) and its branch, read from `.git/HEAD`
    without running git: the hook runs where the agent works."""
    if not cwd:
        return None
    try:
        here = Path(cwd).resolve()
    except OSError:
        return None
    for folder in (here, *here.parents):
        text = _head(folder / ".git")
        if text is None:
            continue
        prefix = "ref: refs/heads/"
        return str(folder), text[len(prefix) :] if text.startswith(prefix) else None
    return None


def _head(git: Path) -> str | None:
    """What `.git/HEAD` says; a worktree's `.git` is a file naming its git folder."""
    try:
        if git.is_file():
            pointer = git.read_text(errors="replace").strip()
            if not pointer.startswith("gitdir: "):
                return None
            git = git.parent / pointer.removeprefix("gitdir: ")
        return (git / "HEAD").read_text(errors="replace").strip()
    except OSError:
        return None


def _what(call: HookCall) -> tuple[str, list[str]]:
    """The call in a few words (the title), and the lines that show it in full."""
    args = call.args
    if call.shell:
        command = str(args["command"])
        return command, ["Command:", "", *(f"    {line}" for line in command.splitlines())]
    path = args.get("file_path") or args.get("path") or args.get("absolute_path")
    old, new = args.get("old_string"), args.get("new_string")
    if isinstance(path, str) and isinstance(old, str) and isinstance(new, str):
        diff = difflib.unified_diff(
            old.splitlines(), new.splitlines(), f"a/{path}", f"b/{path}", lineterm=""
        )
        shown = "\n".join(diff)[:_MAX_SHOWN]
        return f"edit {path}", ["Change:", "", *(f"    {line}" for line in shown.splitlines())]
    content = args.get("content")
    if isinstance(path, str) and isinstance(content, str):
        shown = content[:_MAX_SHOWN]
        return f"write {path}", [
            "New content:",
            "",
            *(f"    {line}" for line in shown.splitlines()),
        ]
    return call.tool, []


def hook_request(
    host: Host,
    call: HookCall,
    *,
    wait: float,
    defer: bool = False,
    now: datetime | None = None,
    local: bool = True,
) -> HookRequest:
    """The request for `call`; the host gives up `wait` seconds from `now`, so the card says
    until when an answer counts. A deferred call's card stays open past that (and says no
    time, so the same call asked again is the same request). `local`: this process runs
    where the agent works, so the working directory's repository is read from disk; a
    server never reads a path an agent sends it."""
    what, shown = _what(call)
    ends = (now or datetime.now(UTC)) + timedelta(seconds=wait)
    asks = "to run a shell command" if call.shell else f"to use its tool {call.tool}"
    session = f", session {call.session}" if call.session else ""
    lines = [f"{host.label} ({call.event}{session}) asks {asks}."]
    if call.cwd:
        lines.append(f"Working directory: {call.cwd}")
    found = repository(call.cwd) if local else None
    if found is not None:
        folder, branch = found
        lines.append(f"Repository: {folder}" + (f", branch {branch}" if branch else ""))
    lines += ["", *shown] if shown else []
    if defer:
        lines += [
            "",
            f"{host.label} waits {_duration(wait)} for an answer, then holds the call; an "
            "answer given later counts when its session is resumed.",
        ]
    else:
        lines += [
            "",
            f"{host.label} waits for an answer until {ends:%H:%M:%S} UTC "
            f"({_duration(wait)}); after that the call is denied.",
        ]
    return HookRequest(
        title=_one_line(f"{host.label}: {what}", _MAX_TITLE),
        tool=SHELL_TOOL if call.shell else call.tool,
        args=dict(call.args),
        schema=SHELL_SCHEMA if call.shell else None,
        description="\n".join(lines)[:3900],
    )


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
