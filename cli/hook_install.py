"""`pizzabot hook install HOST`: put the hook in a coding agent's settings, with a token of
its own that can only ask.

It shows the entry and the file it goes into, then (confirmed, or `--yes`) makes an `ask`
token on the server, keeps it in a file only its owner reads (`~/.config/pizzabot/hooks/`),
and merges the entry into the host's JSON settings: every other key and every other hook
stays as it was, and an earlier Pizza Bot entry for the host is replaced, not doubled. The
settings name the token's file, never the secret, so a project's settings can be committed.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import quote

import typer

from pizzabot.cli.client import Api, CliError, connect
from pizzabot.client.hooks.hosts import HOSTS

__all__ = ["TOKEN_VAR", "HookEntry", "Scope", "entry_for", "http_entry", "install", "merge"]


class Scope(StrEnum):
    project = "project"
    user = "user"


@dataclass(frozen=True)
class HookEntry:
    """Where the host reads its hooks, and the hook to add under `event`."""

    path: Path
    event: str
    hook: dict[str, Any]
    #: Keys the file must have at its top (Cursor and Copilot want "version": 1).
    top: dict[str, Any]


def _settings(host: str, scope: Scope, project: Path) -> Path:
    home = Path.home()
    match host, scope:
        case "claude-code", _:
            return (project if scope is Scope.project else home) / ".claude" / "settings.json"
        case "codex", _:
            return (project if scope is Scope.project else home) / ".codex" / "hooks.json"
        case "gemini", _:
            return (project if scope is Scope.project else home) / ".gemini" / "settings.json"
        case "cursor", _:
            return (project if scope is Scope.project else home) / ".cursor" / "hooks.json"
        case "copilot", Scope.project:
            return project / ".github" / "hooks" / "pizzabot.json"
    raise CliError(
        f"{host} reads its hooks from the repository (.github/hooks/): use --scope project.",
        code=2,
    )


def entry_for(host: str, scope: Scope, project: Path, command: str, timeout: int) -> HookEntry:
    """The settings entry that runs `command` as `host`'s hook, given `timeout` seconds."""
    path = _settings(host, scope, project)
    matched = {"type": "command", "command": command, "timeout": timeout}
    match host:
        case "claude-code":
            return HookEntry(path, "PreToolUse", {"matcher": "Bash", "hooks": [matched]}, {})
        case "codex":
            return HookEntry(path, "PermissionRequest", {"matcher": "Bash", "hooks": [matched]}, {})
        case "gemini":
            gemini = {**matched, "name": "pizzabot", "timeout": timeout * 1000}  # milliseconds
            return HookEntry(
                path, "BeforeTool", {"matcher": "run_shell_command", "hooks": [gemini]}, {}
            )
        case "cursor":
            return HookEntry(
                path,
                "beforeShellExecution",
                {"command": command, "timeout": timeout},
                {"version": 1},
            )
        case "copilot":
            hook = {"type": "command", "bash": command, "timeoutSec": timeout}
            return HookEntry(path, "preToolUse", hook, {"version": 1})
    raise CliError(f"no such host: {host}", code=2)


#: The variable Claude Code's `http` hook reads its token from (settings name it, never hold it).
TOKEN_VAR = "PIZZABOT_HOOK_TOKEN"


def http_entry(scope: Scope, project: Path, url: str, timeout: int) -> HookEntry:
    """Claude Code's `http` hook posting to the server. On PermissionRequest: Claude Code lets
    no call through when that hook fails, where a failed PreToolUse `http` hook would."""
    hook = {
        "type": "http",
        "url": f"{url}/api/hooks/claude-code?timeout={timeout}",
        "headers": {"Authorization": f"Bearer ${TOKEN_VAR}"},
        "allowedEnvVars": [TOKEN_VAR],
        "timeout": timeout,
    }
    path = _settings("claude-code", scope, project)
    return HookEntry(path, "PermissionRequest", {"matcher": "Bash", "hooks": [hook]}, {})


def _ours(hook: Any, marker: str) -> bool:
    """Whether a hook in the file is Pizza Bot's for this host (to replace on reinstall)."""
    return marker in json.dumps(hook)


def merge(current: dict[str, Any], entry: HookEntry, marker: str) -> dict[str, Any]:
    """`current` with `entry` added: other keys and hooks kept, an older entry of ours gone."""
    merged = {**entry.top, **current}
    hooks = merged.get("hooks", {})
    if not isinstance(hooks, dict):
        raise CliError(f'{entry.path}: "hooks" is not an object; fix it by hand first.', code=2)
    listed = hooks.get(entry.event, [])
    if not isinstance(listed, list):
        raise CliError(
            f'{entry.path}: "hooks.{entry.event}" is not a list; fix it by hand first.', code=2
        )
    kept = [h for h in listed if not _ours(h, marker)]
    merged["hooks"] = {**hooks, entry.event: [*kept, entry.hook]}
    return merged


def _read(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text()
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise CliError(f"cannot read {path}: {exc.strerror}", code=2) from None
    if not text.strip():
        return {}
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise CliError(f"{path} is not JSON ({exc}); fix it by hand first.", code=2) from None
    if not isinstance(value, dict):
        raise CliError(f"{path} is not a JSON object; fix it by hand first.", code=2)
    return value


def _write(path: Path, text: str, *, private: bool = False) -> None:
    """Write `text` whole or not at all (a host never reads half a file), keeping the mode
    of a file that was there; a private one is its owner's only."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode = 0o600 if private else path.stat().st_mode & 0o777
    except FileNotFoundError:
        mode = 0o644
    part = path.with_name(f".{path.name}.pizzabot-tmp")
    fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.chmod(part, mode)  # the umask narrowed what open() was given
    os.replace(part, path)


def _pizzabot() -> str:
    """This very `pizzabot`, by its full path, so the host finds it without our PATH."""
    here = Path(sys.argv[0])
    if here.name == "pizzabot" and here.exists():
        return str(here.resolve())
    return shutil.which("pizzabot") or "pizzabot"


def _new_token(api: Api, name: str) -> dict[str, Any]:
    """A new ask token named `name`; one made by an earlier install is revoked first, so a
    reinstall leaves one token for the hook, the one its file holds."""
    for old in api.call("GET", "/api/tokens")["items"]:
        if old["name"] == name and not old["revoked_at"]:
            api.call("DELETE", f"/api/tokens/{quote(old['id'], safe='')}")
            sys.stdout.write(f"revoked {old['id']}: the token of the hook installed before\n")
    made: dict[str, Any] = api.call("POST", "/api/tokens", json={"name": name, "scope": "ask"})
    return made


def install(
    host: Annotated[str, typer.Argument(help=f"One of: {', '.join(HOSTS)}")],
    scope: Annotated[
        Scope, typer.Option("--scope", help="project: this folder's settings; user: yours")
    ] = Scope.project,
    timeout: Annotated[
        int, typer.Option("--timeout", help="Seconds the host gives the hook (a person's time)")
    ] = 600,
    http: Annotated[
        bool,
        typer.Option("--http", help="claude-code: an `http` hook posting to the server instead"),
    ] = False,
    yes: Annotated[bool, typer.Option("--yes", help="Write without asking")] = False,
    url: Annotated[str | None, typer.Option("--url", help="Server URL (env PIZZABOT_URL)")] = None,
    token: Annotated[
        str | None, typer.Option("--token", help="An admin token to make the hook's token with")
    ] = None,
) -> None:
    """Show, then write, HOST's hook settings, with an ask token of its own."""
    if host not in HOSTS:
        raise CliError(f"no such host {host!r}: one of {', '.join(HOSTS)}.", code=2)
    if not 30 <= timeout <= 86400:
        raise CliError("--timeout must be between 30 and 86400 seconds.", code=2)
    if http and host != "claude-code":
        raise CliError(f"--http: only claude-code posts its hooks; {host} runs a command.", code=2)
    api = connect(url, token)
    token_path = Path.home() / ".config" / "pizzabot" / "hooks" / f"{host}.token"
    words = [_pizzabot(), "hook", host, "--timeout", str(timeout), "--url", api.url]
    command = shlex.join([*words, "--token-file", str(token_path)])
    if http:
        entry, marker = http_entry(scope, Path.cwd(), api.url, timeout), "/api/hooks/claude-code"
    else:
        entry, marker = entry_for(host, scope, Path.cwd(), command, timeout), f"hook {host} "
    merged = merge(_read(entry.path), entry, marker)
    sys.stdout.write(
        f"{HOSTS[host].label}: hooks.{entry.event} in {entry.path} gets\n"
        f"{json.dumps(entry.hook, indent=2)}\n"
        f"and a new ask token in {token_path} (an earlier one of this hook is revoked).\n"
    )
    if not yes:
        if not sys.stdin.isatty():
            raise CliError("not written: pass --yes to write without a terminal to confirm.")
        if not typer.confirm("Write it?"):
            raise CliError("not written.")
    made = _new_token(api, f"{host}-hook")
    _write(token_path, str(made["token"]) + "\n", private=True)
    _write(entry.path, json.dumps(merged, indent=2) + "\n")
    sys.stdout.write(
        f"written: {entry.path} (token {made['id']}, {made['name']}, scope ask; "
        f"`pizzabot tokens revoke {made['id']}` ends it)\n"
    )
    if http:
        sys.stdout.write(
            f"Claude Code sends the token from ${TOKEN_VAR}: add this to your shell's profile "
            f'and start Claude Code anew:\n  export {TOKEN_VAR}="$(cat {token_path})"\n'
        )
