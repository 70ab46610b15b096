"""Typer classes for `pizzabot`: help that reads right, and failures as one line, never a traceback.

Two things typer does not do by itself here:

- Its rich help (typer 0.29) prints a type for every option, flags included, so `--help` and
  `--no-worker` read as if they took a `<bool>` value (its plain help skips flags). An empty
  metavar on each flag makes the rich help skip it too.
- An exception escaping a command becomes a full-screen traceback. `CliError` (bad input, the
  server's refusal, a server that is down) prints its one line and exits with its code;
  anything else prints one line naming the error, and `PIZZABOT_DEBUG=1` shows the traceback.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import typer
from rich.console import Console
from rich.text import Text
from typer.core import TyperCommand, TyperGroup, TyperOption
from typer.models import CommandFunctionType

from pizzabot.cli.client import CliError

__all__ = ["App", "Command", "Group", "fail", "stderr"]

#: Never markup: error messages quote user data (a skill name, a server's detail).
stderr = Console(stderr=True, markup=False, highlight=False, emoji=False)


def fail(message: str, *, code: int = 1) -> None:
    """Print one error line on stderr, unwrapped so a command or URL in it can be copied."""
    line = Text("error: ", style="bold red")
    line.append(" ".join(message.split()))
    stderr.print(line, soft_wrap=True)
    raise typer.Exit(code)


def _flags_without_type(params: list[Any]) -> None:
    for p in params:
        if isinstance(p, TyperOption) and (p.is_flag or p.count) and p.metavar is None:
            p.metavar = ""


def _invoke(invoke: Callable[[], Any]) -> Any:
    try:
        return invoke()
    except CliError as exc:
        fail(str(exc), code=exc.code)
    except (typer.Exit, typer.Abort, typer.TyperException):
        raise
    except Exception as exc:
        if os.environ.get("PIZZABOT_DEBUG"):
            raise
        fail(
            f"unexpected {type(exc).__name__}: {exc} "
            "(PIZZABOT_DEBUG=1 shows the traceback; please report it)"
        )


class Command(TyperCommand):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _flags_without_type(self.params)

    def get_help_option(self, ctx: Any) -> Any:
        option = super().get_help_option(ctx)
        _flags_without_type([option])
        return option

    def invoke(self, ctx: Any) -> Any:
        return _invoke(lambda: super(Command, self).invoke(ctx))


class Group(TyperGroup):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _flags_without_type(self.params)

    def get_help_option(self, ctx: Any) -> Any:
        option = super().get_help_option(ctx)
        _flags_without_type([option])
        return option

    def invoke(self, ctx: Any) -> Any:
        return _invoke(lambda: super(Group, self).invoke(ctx))


class App(typer.Typer):
    """A Typer whose commands and sub-apps use `Command` and `Group` unless told otherwise."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("cls", Group)
        super().__init__(**kwargs)

    def command(  # type: ignore[override]
        self, name: str | None = None, *, cls: type[TyperCommand] | None = None, **kwargs: Any
    ) -> Callable[[CommandFunctionType], CommandFunctionType]:
        return super().command(name, cls=cls or Command, **kwargs)
