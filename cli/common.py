"""What every client command of `pizzabot` shares: the one Typer app, the server's address
and token options, and the calls and lines they print.

The commands are a client of the HTTP API and import nothing of the server, so a terminal on
another device works the same way (`--url`, `--token`).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any

import typer
from rich.text import Text

from pizzabot.cli.client import Api, connect
from pizzabot.cli.render import (
    console,
)
from pizzabot.cli.typer_app import App

__all__ = [
    "JsonOpt",
    "TokenOpt",
    "UrlOpt",
    "app",
    "call",
    "print_line",
]

app = App(
    help="Pizza Bot: an inbox for your AI agents' background work.",
    no_args_is_help=True,
    add_completion=False,
)

UrlOpt = Annotated[str | None, typer.Option("--url", help="Server URL (env PIZZABOT_URL)")]
TokenOpt = Annotated[str | None, typer.Option("--token", help="API token (env PIZZABOT_API_TOKEN)")]


JsonOpt = Annotated[
    bool, typer.Option("--json", help="Print the server's JSON answer as it is, for scripts")
]


class BoxName(StrEnum):
    action = "action"
    unread = "unread"


def api_of(url: str | None, token: str | None) -> Api:
    return connect(url, token)


def call(url: str | None, token: str | None, method: str, path: str, **kw: Any) -> Any:
    return connect(url, token).call(method, path, **kw)


def print_line(*parts: str | tuple[str, str]) -> None:
    """One line on stdout; data goes in as plain text, a (text, style) pair is styled."""
    line = Text()
    for p in parts:
        if isinstance(p, tuple):
            line.append(p[0], style=p[1])
        else:
            line.append(p)
    console.print(line, soft_wrap=True)
