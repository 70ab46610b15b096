"""`pizzabot away`: say you are away until a time, and who decides for you meanwhile; or
that you are back. A client of `/api/away`."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Annotated

import typer

from pizzabot.cli.client import CliError
from pizzabot.cli.common import JsonOpt, TokenOpt, UrlOpt, app, call, print_line
from pizzabot.cli.render import dump_json

_SPAN = re.compile(r"^(\d{1,4})([mhdw])$")
_UNIT = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
EXIT_ERROR = 2


def until_of(text: str, *, now: datetime | None = None) -> datetime:
    """`--until` as a time: a span from now (`30m`, `8h`, `3d`, `2w`), a date (away until
    that day begins, UTC) or an ISO 8601 time (UTC unless it names its zone)."""
    now = now or datetime.now(UTC)
    span = _SPAN.match(text.strip())
    if span:
        return now + timedelta(**{_UNIT[span.group(2)]: int(span.group(1))})
    try:
        at = datetime.fromisoformat(text.strip())
    except ValueError:
        raise CliError(
            f"--until {text!r}: give a date (2026-12-24), a time (2026-12-24T09:00) "
            "or a span (8h, 3d)",
            code=EXIT_ERROR,
        ) from None
    return at if at.tzinfo is not None else at.replace(tzinfo=UTC)


@app.command()
def away(
    until: Annotated[
        str | None, typer.Option("--until", help="Back at: a date, an ISO time, or 8h / 3d")
    ] = None,
    delegate: Annotated[
        str | None, typer.Option("--delegate", help="Who decides for you meanwhile (people:)")
    ] = None,
    back: Annotated[bool, typer.Option("--back", help="You are back: end it now")] = False,
    person: Annotated[
        str | None, typer.Option("--person", help="Someone else (admins only)")
    ] = None,
    list_: Annotated[bool, typer.Option("--list", help="Who is away now")] = False,
    url: UrlOpt = None,
    token: TokenOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Say you are away until a time, and who decides your cards meanwhile (`--back` ends
    it; `--list` shows who is away)."""
    if list_:
        data = call(url, token, "GET", "/api/away")
        if as_json:
            dump_json(data)
            return
        for a in data["items"]:
            print_line(a["person"], " is away until ", a["until"], ", delegate ", a["delegate"])
        if not data["items"]:
            print_line("Nobody is away.")
        return
    if back:
        params = {"person": person} if person else {}
        data = call(url, token, "DELETE", "/api/away", params=params)
        if as_json:
            dump_json(data)
            return
        print_line(data["person"], " is back: cards go to them again.")
        return
    if until is None or delegate is None:
        raise CliError("give --until and --delegate (or --back, or --list)", code=EXIT_ERROR)
    body = {"delegate": delegate, "until": until_of(until).isoformat(), "person": person}
    data = call(url, token, "POST", "/api/away", json=body)
    if as_json:
        dump_json(data)
        return
    print_line(
        data["person"],
        " is away until ",
        (data["until"], "bold"),
        ": ",
        data["delegate"],
        " decides for them.",
    )
