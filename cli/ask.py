"""`pizzabot ask` and `pizzabot mcp`: the inbox for agents Pizza Bot does not run.

`ask` files a request (an Action item) on a running server and prints it as JSON; with
`--wait` it holds until a person decides. Its exit code is the decision, so a shell script
or a hook can branch on it:

    0  approved or edited: go ahead (an edit's arguments are in the JSON's "args")
    1  rejected or expired: do not run it (the reason is in "reason")
    2  the request could not be made (bad input, server down, token refused): one line on stderr
    3  still pending (no --wait, or --timeout passed first): nothing decided yet

Pending is not 0 on purpose: `pizzabot ask ... && run_it` must never run an undecided call.

`mcp` serves Pizza Bot's MCP tools on stdin/stdout for MCP clients that start servers as
processes; the tools file their requests with the same server.
"""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from pizzabot.cli.client import Api, CliError, connect, detail_text
from pizzabot.cli.typer_app import App

if TYPE_CHECKING:
    from pizzabot.client import RequestState

__all__ = ["EXIT_APPROVED", "EXIT_ERROR", "EXIT_PENDING", "EXIT_REFUSED", "register"]

EXIT_APPROVED = 0
EXIT_REFUSED = 1
EXIT_ERROR = 2
EXIT_PENDING = 3
#: A schema file, an --args value or a --preview file bigger than this is a mistake.
_MAX_JSON = 256 * 1024

UrlOpt = Annotated[str | None, typer.Option("--url", help="Server URL (env PIZZABOT_URL)")]
TokenOpt = Annotated[str | None, typer.Option("--token", help="API token (env PIZZABOT_API_TOKEN)")]


def _object(text: str, what: str) -> dict[str, Any]:
    if len(text) > _MAX_JSON:
        raise CliError(f"{what} is over {_MAX_JSON // 1024} KiB.", code=EXIT_ERROR)
    try:
        value = json.loads(text, parse_constant=_no_constant)
    except ValueError as exc:
        raise CliError(f"{what} is not JSON: {exc}", code=EXIT_ERROR) from None
    if not isinstance(value, dict):
        raise CliError(f"{what} must be a JSON object ({{...}}).", code=EXIT_ERROR)
    return value


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _schema(path: Path | None) -> dict[str, Any] | None:
    if path is None:
        return None
    try:
        with path.open("rb") as f:
            raw = f.read(_MAX_JSON + 1)
    except OSError as exc:
        raise CliError(f"cannot read --schema {path}: {exc.strerror}", code=EXIT_ERROR) from None
    return _object(raw.decode("utf-8", errors="replace"), f"--schema {path}")


def _preview(value: str | None) -> str | None:
    """--preview's text: as given, or `@FILE`'s contents (UTF-8)."""
    if value is None or not value.startswith("@"):
        return value
    path = Path(value[1:])
    try:
        with path.open("rb") as f:
            raw = f.read(_MAX_JSON + 1)
    except OSError as exc:
        raise CliError(f"cannot read --preview {value}: {exc.strerror}", code=EXIT_ERROR) from None
    if len(raw) > _MAX_JSON:
        raise CliError(f"--preview {value} is over {_MAX_JSON // 1024} KiB.", code=EXIT_ERROR)
    text = raw.decode("utf-8", errors="replace")
    if not text.strip():
        raise CliError(f"--preview {value} is empty.", code=EXIT_ERROR)
    return text


def exit_code(status: str) -> int:
    """The exit code of a request in this status (see the module docstring)."""
    if status in {"approved", "edited", "answered"}:
        return EXIT_APPROVED
    if status == "pending":
        return EXIT_PENDING
    return EXIT_REFUSED


def ask(
    skill: Annotated[str, typer.Argument(help="The inbox-only skill that says who decides")],
    tool: Annotated[str, typer.Option("--tool", help="The tool the agent wants to call")],
    args: Annotated[
        str, typer.Option("--args", help="Its arguments as a JSON object", show_default=False)
    ] = "{}",
    schema: Annotated[
        Path | None,
        typer.Option("--schema", help="A JSON Schema file for the arguments (an edit form)"),
    ] = None,
    title: Annotated[
        str | None, typer.Option("--title", help="The card's title (default: the tool)")
    ] = None,
    description: Annotated[
        str | None, typer.Option("--description", help="More words for the card")
    ] = None,
    wait: Annotated[
        bool, typer.Option("--wait", help="Hold until someone decides (or --timeout)")
    ] = False,
    timeout: Annotated[
        float | None,
        typer.Option("--timeout", help="Seconds until the request expires on the server"),
    ] = None,
    preview: Annotated[
        str | None,
        typer.Option(
            "--preview",
            help="What the call would do (a dry run's output), as TEXT or @FILE; "
            "shown on the card as the agent's",
        ),
    ] = None,
    url: UrlOpt = None,
    token: TokenOpt = None,
) -> None:
    """Ask a person before a tool call; print the decision as JSON.

    Exit 0 approved or edited, 1 rejected or expired, 3 still pending, 2 on errors.
    """
    card = {"title": title, "description": description, "timeout": timeout, "preview": preview}
    try:
        decision = _ask(skill, tool, args, schema, card, wait, url, token)
    except CliError as exc:
        raise CliError(str(exc), code=EXIT_ERROR) from None
    except Exception as exc:
        # Exit 1 means "rejected": nothing unexpected may end with it.
        raise CliError(f"unexpected {type(exc).__name__}: {exc}", code=EXIT_ERROR) from None
    sys.stdout.write(json.dumps(decision.model_dump(mode="json"), ensure_ascii=False) + "\n")
    raise typer.Exit(exit_code(decision.status))


def _ask(
    skill: str,
    tool: str,
    args: str,
    schema: Path | None,
    card: dict[str, Any],
    wait: bool,
    url: str | None,
    token: str | None,
) -> RequestState:
    """File the request; `card`: its title, description, timeout and preview as given."""
    from pizzabot.client import Inbox, InboxError
    from pizzabot.client._wire import MAX_TITLE

    arguments = _object(args, "--args")
    form = _schema(schema)
    timeout = card["timeout"]
    if timeout is not None and (not math.isfinite(timeout) or timeout <= 0):
        raise CliError("--timeout must be a positive number of seconds.", code=EXIT_ERROR)
    more = {
        "schema": form,
        "description": card["description"],
        "timeout": timeout,
        "preview": _preview(card["preview"]),
    }
    api = connect(url, token, agent=True)
    warn_if_owner(api)
    try:
        with Inbox(api.url, api.token) as inbox:
            if wait:
                decision = inbox.ask(skill, tool=tool, args=arguments, title=card["title"], **more)
            else:
                title = card["title"] or tool[:MAX_TITLE]
                decision = inbox.request(skill, title=title, tool=tool, args=arguments, **more)
    except InboxError as exc:
        raise CliError(_error_line(exc, api.token_from), code=EXIT_ERROR) from None
    return decision


def warn_if_owner(api: Api) -> None:
    """An agent that asks with the server's own token (read from its data folder) could also
    decide what it asks: say so on stderr, and how to make it a token that can only ask."""
    if api.from_file:
        sys.stderr.write(
            "pizzabot: asking with the server's own API token, which may also decide; give "
            "this agent its own: PIZZABOT_AGENT_TOKEN=$(pizzabot tokens create NAME --scope ask)\n"
        )


def _error_line(exc: Exception, token_from: str) -> str:
    status = getattr(exc, "status", None)
    if status == 401:
        return (
            f"401: the server refused the API token {token_from}: pass an ask token made with "
            "`pizzabot tokens create NAME --scope ask` with --token or PIZZABOT_AGENT_TOKEN."
        )
    if status == 403:
        return f"403: {exc}"
    if status is None:
        return f"{exc}: start the server with `pizzabot serve`, or pass --url / set PIZZABOT_URL."
    # The server's detail in words, as every other command prints it (never a Python repr).
    return f"{status}: {detail_text(getattr(exc, 'detail', None) or str(exc))}"


#: The inbox-only skill `pizzabot mcp` asks through unless told otherwise (as the server's).
DEFAULT_SKILL = "approvals"


def mcp(
    url: UrlOpt = None,
    token: TokenOpt = None,
    skill: Annotated[
        str | None,
        typer.Option(
            "--skill", help="The inbox-only skill requests go to (env PIZZABOT_MCP_SKILL)"
        ),
    ] = None,
) -> None:
    """Serve Pizza Bot's MCP tools (request_approval, ask_human) on stdin/stdout."""
    try:
        from pizzabot.client.mcp.stdio import serve
    except ImportError:
        raise CliError("the MCP server is not available in this installation.") from None
    api = connect(url, token, agent=True)
    warn_if_owner(api)
    serve(api.url, api.token, skill=skill or os.environ.get("PIZZABOT_MCP_SKILL") or DEFAULT_SKILL)


def register(app: App) -> None:
    """Add `ask` and `mcp` to the `pizzabot` command."""
    app.command("ask")(ask)
    app.command("mcp")(mcp)
