"""`pizzabot schedules …`: runs started by the clock."""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import quote

import typer
from rich.text import Text

from pizzabot.cli.common import JsonOpt, TokenOpt, UrlOpt, app, call, print_line
from pizzabot.cli.render import (
    console,
    dump_json,
    empty,
    id_column,
    table,
    time_column,
    when,
)
from pizzabot.cli.typer_app import App, stderr

# -- schedules ---------------------------------------------------------------------------

schedules_app = App(
    help="List, add, pause, resume and remove schedules (runs started by the clock).",
    no_args_is_help=False,
)
app.add_typer(schedules_app, name="schedules")


def _schedule_line(s: dict[str, Any]) -> None:
    when_ = s["cron"] or f"every {int(s['every_seconds'] or 0)}s"
    state = "paused" if s["paused"] else when((s["next_fire_times"] or [None])[0]) or "-"
    print_line(f"{s['id']}  {s['skill']}  {when_} ({s['timezone']})  next: {state}")


@schedules_app.callback(invoke_without_command=True)
def schedules_list(
    ctx: typer.Context, url: UrlOpt = None, token: TokenOpt = None, as_json: JsonOpt = False
) -> None:
    """List schedules with their next fire times (the default)."""
    if ctx.invoked_subcommand is not None:
        return
    data = call(url, token, "GET", "/api/schedules")
    if as_json:
        dump_json(data)
        return
    if data["items"]:
        rows = []
        for s in data["items"]:
            last = s["last_fire"]
            rows.append(
                [
                    s["id"],
                    s["skill"],
                    (s["cron"] or f"every {int(s['every_seconds'] or 0)}s") + f" {s['timezone']}",
                    s["misfire"],
                    s["source"],
                    "paused"
                    if s["paused"]
                    else "\n".join(when(x) for x in s["next_fire_times"][:2]),
                    f"{when(last['fire_time'])} {last['status']}" if last else "",
                ]
            )
        console.print(
            table(
                [
                    id_column(),
                    "skill",
                    "when",
                    "misfire",
                    "source",
                    time_column("next fire"),
                    "last fire",
                ],
                rows,
            )
        )
    else:
        empty("schedules")
    for e in data.get("errors", []):
        stderr.print(
            Text.assemble(
                ("schedule refused: ", "bold red"), f"skill {e['skill']}: {e['message']}"
            ),
            soft_wrap=True,
        )


@schedules_app.command("add")
def schedules_add(
    skill: str,
    text: Annotated[str, typer.Argument(help="The input of each run")] = "",
    cron: Annotated[str | None, typer.Option(help='Cron expression, e.g. "0 8 * * 1-5"')] = None,
    every: Annotated[str | None, typer.Option(help="Interval, e.g. 30m, 2h")] = None,
    timezone: Annotated[str, typer.Option(help="IANA zone for cron")] = "UTC",
    misfire: Annotated[str, typer.Option(help="skip or run_once")] = "skip",
    url: UrlOpt = None,
    token: TokenOpt = None,
) -> None:
    """Add a schedule that starts SKILL with TEXT (give --cron or --every)."""
    body = {
        "skill": skill,
        "input": text,
        "cron": cron,
        "every": every,
        "timezone": timezone,
        "misfire": misfire,
    }
    _schedule_line(call(url, token, "POST", "/api/schedules", json=body))


@schedules_app.command("pause")
def schedules_pause(schedule_id: str, url: UrlOpt = None, token: TokenOpt = None) -> None:
    """Pause a schedule: no fires until it is resumed (paused time is not a misfire)."""
    _schedule_line(call(url, token, "POST", f"/api/schedules/{quote(schedule_id, safe='')}/pause"))


@schedules_app.command("resume")
def schedules_resume(schedule_id: str, url: UrlOpt = None, token: TokenOpt = None) -> None:
    """Resume a paused schedule."""
    _schedule_line(call(url, token, "POST", f"/api/schedules/{quote(schedule_id, safe='')}/resume"))


@schedules_app.command("remove")
def schedules_remove(schedule_id: str, url: UrlOpt = None, token: TokenOpt = None) -> None:
    """Remove a schedule added through the API or CLI (skill schedules live in their file)."""
    call(url, token, "DELETE", f"/api/schedules/{quote(schedule_id, safe='')}")
    print_line(f"{schedule_id}: removed")
