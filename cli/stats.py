"""`pizzabot stats`: approval fatigue, measured — cards per day per person and per tool, time
to decide, approve rate, and the calls approved unchanged every time with the rule that would
stop asking. The figures are the server's (`GET /api/stats`), as the web page's Stats shows
them."""

from __future__ import annotations

import re
from collections import defaultdict
from datetime import UTC, datetime
from typing import Annotated, Any

import typer
from rich.table import Column
from rich.text import Text

from pizzabot.cli.client import CliError
from pizzabot.cli.common import JsonOpt, TokenOpt, UrlOpt, app, call, print_line
from pizzabot.cli.render import console, dump_json, empty, table, text_column, when

__all__ = ["period", "seconds", "stats"]

_AGO = re.compile(r"^[0-9]{1,4}[smhdw]$")


def seconds(value: float | None) -> str:
    """A duration as people read it: 45s, 12m, 3.5h, 2.0d."""
    if value is None:
        return "–"
    if value < 60:
        return f"{value:.0f}s"
    if value < 3600:
        return f"{value / 60:.0f}m"
    if value < 86400:
        return f"{value / 3600:.1f}h"
    return f"{value / 86400:.1f}d"


def period(since: str) -> dict[str, str]:
    """The API's parameter for `--since`: a duration as `since`, a date or time as `start`
    (UTC unless it says otherwise)."""
    text = since.strip()
    if _AGO.match(text):
        return {"since": text}
    try:
        at = datetime.fromisoformat(text)
    except ValueError:
        raise CliError(
            f"--since {since!r} is neither a duration (30d, 12h, 45m, 2w) nor an ISO date or time",
            code=2,
        ) from None
    return {"start": (at if at.tzinfo else at.replace(tzinfo=UTC)).isoformat()}


def percent(rate: float | None) -> str:
    return "–" if rate is None else f"{rate * 100:.0f}%"


@app.command()
def stats(
    since: Annotated[
        str, typer.Option(help="The period: 30d, 12h, 2w … ago, or an ISO date")
    ] = "30d",
    min_repeats: Annotated[
        int,
        typer.Option(help="Suggest a rule after this many approvals unchanged", min=2, max=1000),
    ] = 3,
    url: UrlOpt = None,
    token: TokenOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """How many cards people get and how they decide them, and what would stop asking."""
    params: dict[str, Any] = {"min_repeats": min_repeats, **period(since)}
    data = call(url, token, "GET", "/api/stats", params=params)
    if as_json:
        dump_json(data)
        return
    _summary(data)
    if not data["cards"]:
        return
    _days(data)
    _people(data["people"])
    _tools(data["tools"])
    _repeats(data["repeats"], data["min_repeats"])


def _summary(data: dict[str, Any]) -> None:
    o = data["outcomes"]
    print_line(
        ("cards ", "bold"),
        f"{when(data['since'])} – {when(data['until'])}: {data['cards']}",
    )
    if not data["cards"]:
        return
    print_line(
        f"approved {o['approved']}, edited {o['edited']}, rejected {o['rejected']}, "
        f"expired {o['expired']}, cancelled {o['cancelled']}, pending {o['pending']}; "
        f"approve rate {percent(o['approve_rate'])}; time to decide p50 "
        f"{seconds(o['p50_seconds'])}, p90 {seconds(o['p90_seconds'])}"
    )


def _days(data: dict[str, Any]) -> None:
    people: dict[str, list[str]] = defaultdict(list)
    for d in data["per_day_person"]:
        people[d["day"]].append(f"{d['by'] or '?'} {d['cards']}")
    tools: dict[str, list[str]] = defaultdict(list)
    for d in data["per_day_tool"]:
        tools[d["day"]].append(f"{d['by']} {d['cards']}")
    rows = (
        [d["day"], d["cards"], ", ".join(people[d["day"]]), ", ".join(tools[d["day"]])]
        for d in data["per_day"]
    )
    cols: list[Column | str] = [
        "day (UTC)",
        "cards",
        text_column("decided by", ratio=1),
        text_column("tools", ratio=1),
    ]
    console.print(table(cols, rows))


def _people(people: list[dict[str, Any]]) -> None:
    if not people:
        empty("decisions by people")
        return
    rows = (
        [
            p["person"],
            p["cards"],
            f"{p['cards'] / p['days']:.1f} (busiest {p['busiest_day']})",
            percent(p["approve_rate"]),
            seconds(p["p50_seconds"]),
            seconds(p["p90_seconds"]),
        ]
        for p in people
    )
    cols = ["person", "decided", "per day", "approved", "p50", "p90"]
    console.print(table(cols, rows))


def _tools(tools: list[dict[str, Any]]) -> None:
    rows = (
        [
            t["skill"],
            t["tool"],
            t["cards"],
            percent(t["approve_rate"]),
            seconds(t["p50_seconds"]),
            seconds(t["p90_seconds"]),
        ]
        for t in tools
    )
    console.print(table(["skill", "tool", "cards", "approved", "p50", "p90"], rows))


def _repeats(repeats: list[dict[str, Any]], least: int) -> None:
    if not repeats:
        empty(f"call approved unchanged {least} times or more every time")
        return
    for r in repeats:
        what = r["tool"] if r["args"] is None else f"{r['tool']} with the same arguments"
        console.print(
            Text.assemble(
                (f"{r['skill']}: ", "bold"),
                f"{what} approved unchanged {r['approved']} of {r['approved']} times",
            ),
            soft_wrap=True,
        )
        console.print(Text(r["snippet"].rstrip() + "\n"), soft_wrap=True)
