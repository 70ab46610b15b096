"""`pizzabot hook HOST`: a coding agent's hook that asks a person before a tool call.

The host (Claude Code, Codex, Gemini CLI, Cursor, Copilot CLI) runs this command before a
tool call and writes the call as JSON on stdin; the command files a request on the Pizza
Bot server (through `pizzabot.client`), waits for the decision, and prints the host's own
allow or deny (`pizzabot.client.hooks`).

It fails closed and never hangs: a payload it cannot read, a server that is down, a refused
token or request, the kill switch, and no decision in time each end as the host's deny with
a reason that says which. The host stops a hook after its own time-out, so the command
waits a margin less than `--timeout` (the time-out the host was given for it), and the
request expires on the server at that moment too: the card says until when an answer
counts. Nothing is ever left to the host's reading of silence or of a crash.

The hook asks with a token that can only ask (`pizzabot hook install` makes one), so the
agent it guards cannot approve its own calls: the server's own token file is refused here.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from pizzabot.cli.client import CliError, connect, detail_text
from pizzabot.cli.typer_app import App
from pizzabot.client.hooks.hosts import (
    HOSTS,
    HookAnswer,
    HookCall,
    HookInputError,
    Host,
    Verdict,
    unreadable_call,
)
from pizzabot.client.hooks.request import hook_request
from pizzabot.client.hooks.verdict import margin, verdict_of

if TYPE_CHECKING:  # the client (pydantic) is loaded when a hook runs, not for every command
    from pizzabot.client import InboxError

__all__ = ["DEFAULT_SKILL", "hook_app", "run_hook"]

#: The inbox-only skill `make serve` loads, whose rules know coding agents' shell commands.
DEFAULT_SKILL = "approvals"
#: The most of a hook's input read: a tool call, not a file upload.
_MAX_INPUT = 1024 * 1024

hook_app = App(
    help="A coding agent's hook: ask a person before its tool calls (and `install` it).",
    no_args_is_help=True,
)


def _refusal(exc: InboxError, url: str) -> Verdict:
    from pizzabot.client._wire import worth_waiting

    status = exc.status
    if status is None and worth_waiting(exc):  # no status, worth another try: not reached
        why = f"Pizza Bot is not reachable at {url} ({exc.detail})"
    elif status == 401:
        why = (
            "Pizza Bot refused the hook's token (401); make a new one with `pizzabot hook install`"
        )
    elif status is not None:  # the server's words, never a Python repr of its detail
        why = f"Pizza Bot refused the request ({status}: {detail_text(exc.detail or str(exc))})"
    else:
        why = f"Pizza Bot could not be asked ({exc})"
    return Verdict(False, f"{why}, so the call is blocked.")


def _ask(
    host: Host,
    call: HookCall,
    *,
    skill: str,
    wait: float,
    defer: bool,
    url: str | None,
    token: str | None,
) -> Verdict:
    from pizzabot.client import Inbox, InboxError

    started = time.monotonic()
    try:
        api = connect(url, token, agent=True)
    except CliError as exc:
        return Verdict(False, f"Pizza Bot could not be asked ({exc}), so the call is blocked.")
    if api.from_file:
        return Verdict(
            False,
            "The hook has no token of its own (it would ask with the server's, which may also "
            f"decide): run `pizzabot hook install {host.name}`. The call is blocked.",
        )
    # Deferred, the call is asked again when its session resumes: the same call (the host's
    # id of it) finds the same request, decided meanwhile or still open.
    defer = defer and call.event in host.defers and call.call_id is not None
    key = f"{host.name}-{call.session}-{call.call_id}" if defer else None
    request = hook_request(host, call, wait=wait, defer=defer)
    try:
        # Each try gets a short time, so a server that hangs cannot outlast the host's limit.
        with Inbox(api.url, api.token, timeout=min(30.0, max(2.0, wait / 4))) as inbox:
            state = inbox.request(
                skill,
                title=request.title,
                tool=request.tool,
                args=request.args,
                schema=request.schema,
                description=request.description,
                timeout=None if defer else max(1.0, wait),
                idempotency_key=key,
            )
            left = wait - (time.monotonic() - started)
            if state.pending and left > 0:
                state = inbox.until_decided(state.id, timeout=left)
    except InboxError as exc:
        return _refusal(exc, api.url)
    if defer and state.pending:
        why = f"No one has decided in Pizza Bot yet ({state.url}); resume the session to ask again."
        return Verdict(False, why, defer=True)
    return verdict_of(state, wait)


def run_hook(
    host: Host,
    text: str,
    *,
    skill: str,
    timeout: float,
    url: str | None,
    token: str | None,
    token_file: Path | None = None,
    defer: bool = False,
) -> HookAnswer:
    """The host's answer to the hook input `text`: always an allow or a deny."""
    raw: object = None
    try:
        raw = json.loads(text)
        if not isinstance(raw, dict):
            raise HookInputError("not a JSON object")
        call = host.read(raw)
    except (ValueError, HookInputError) as exc:
        why = f"Pizza Bot could not read {host.label}'s hook input ({exc})"
        return host.answer(
            unreadable_call(host, raw), Verdict(False, f"{why}, so the call is blocked.")
        )
    if not math.isfinite(timeout) or timeout < 10:
        why = "pizzabot hook: --timeout must be at least 10 seconds"
        return host.answer(call, Verdict(False, f"{why}, so the call is blocked."))
    wait = timeout - margin(timeout)
    try:
        secret = _token_from(token_file, token)
        verdict = _ask(host, call, skill=skill, wait=wait, defer=defer, url=url, token=secret)
    except HookInputError as exc:
        verdict = Verdict(False, f"{exc}, so the call is blocked.")
    except Exception as exc:  # fail closed: whatever went wrong, the call does not run
        why = f"Pizza Bot failed ({type(exc).__name__}: {exc})"
        verdict = Verdict(False, f"{why}, so the call is blocked.")
    return host.answer(call, verdict)


def _token_from(path: Path | None, token: str | None) -> str | None:
    if path is None:
        return token
    try:
        return path.read_text().strip() or None
    except OSError as exc:
        raise HookInputError(f"cannot read --token-file {path}: {exc.strerror}") from None


def _command(host: Host) -> Callable[..., None]:
    def hook(
        skill: Annotated[
            str | None,
            typer.Option(
                "--skill",
                help=f"The inbox-only skill that decides (env PIZZABOT_HOOK_SKILL; default {DEFAULT_SKILL})",
            ),
        ] = None,
        timeout: Annotated[
            float,
            typer.Option(
                "--timeout", help="Seconds the host gives this hook; it answers a margin sooner"
            ),
        ] = host.default_timeout,
        token_file: Annotated[
            Path | None, typer.Option("--token-file", help="A file holding the hook's ask token")
        ] = None,
        defer: Annotated[
            bool,
            typer.Option(
                "--defer",
                help="Undecided in time: hold the call (Claude Code's defer, headless -p only) "
                "instead of denying it; the card stays open",
            ),
        ] = False,
        url: Annotated[
            str | None, typer.Option("--url", help="Server URL (env PIZZABOT_URL)")
        ] = None,
        token: Annotated[
            str | None, typer.Option("--token", help="API token (env PIZZABOT_API_TOKEN)")
        ] = None,
    ) -> None:
        text = sys.stdin.buffer.read(_MAX_INPUT + 1).decode("utf-8", errors="replace")
        answer = run_hook(
            host,
            text,
            skill=skill or os.environ.get("PIZZABOT_HOOK_SKILL") or DEFAULT_SKILL,
            timeout=timeout,
            url=url,
            token=token,
            token_file=token_file,
            defer=defer,
        )
        if answer.stdout:
            sys.stdout.write(answer.stdout + "\n")
        if answer.stderr:
            sys.stderr.write(answer.stderr)
        raise typer.Exit(answer.code)

    hook.__doc__ = (
        f"{host.label}'s hook: read its call on stdin, ask a person, print allow or deny."
    )
    return hook


for _host in HOSTS.values():
    hook_app.command(_host.name)(_command(_host))
