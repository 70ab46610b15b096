"""`pizzabot run`, `runs`, `show`, `cancel`, `say`: starting runs and following them."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated
from urllib.parse import quote

import typer

from pizzabot.cli import ids
from pizzabot.cli.client import Api, ApiError, CliError
from pizzabot.cli.common import JsonOpt, TokenOpt, UrlOpt, api_of, app, call, print_line
from pizzabot.cli.render import (
    console,
    dump_json,
    empty,
    id_column,
    table,
    time_column,
    timeline,
    when,
)


def _refused_skill(api: Api, skill: str) -> str | None:
    """Why the server refused the skill file of that name, if it did (GET /api/skills names
    each refused file's skill when its `name:` could be read; else the file name counts)."""
    try:
        data = api.call("GET", "/api/skills")
    except CliError:
        return None
    errors = data.get("errors") or []
    named = [e for e in errors if e.get("name") == skill] or [
        e for e in errors if e.get("name") is None and Path(str(e.get("path", ""))).stem == skill
    ]
    watch = data.get("watch_seconds")
    then = (
        f": the server loads it again within {watch:g} s"
        if watch
        else ", then run `pizzabot skills --reload`"
    )
    for e in named:
        line = f" (line {e['line']})" if e.get("line") else ""
        return (
            f"skill {skill!r} was refused when the server loaded {e['path']}{line}: "
            f"{e.get('message')}. Fix the file{then}."
        )
    if errors:
        return f"the server also refused {len(errors)} skill file(s): `pizzabot skills` says why"
    return None


@app.command()
def run(
    skill: str,
    text: Annotated[
        str | None,
        typer.Argument(help="What to do. Left out: read from stdin when it is not a terminal"),
    ] = None,
    url: UrlOpt = None,
    token: TokenOpt = None,
) -> None:
    """Start a run of SKILL with TEXT as its input (or stdin: `pizzabot run SKILL < task.txt`)."""
    if text is None and not sys.stdin.isatty():
        text = sys.stdin.read()
    if not (text or "").strip():
        raise CliError(
            f"Nothing to do: give the run its input, e.g. pizzabot run {skill} "
            '"send the team the menu", or pipe it on stdin.',
            code=2,
        )
    api = api_of(url, token)
    try:
        r = api.call("POST", "/api/runs", json={"skill": skill, "input": text})
    except ApiError as exc:
        why = _refused_skill(api, skill) if exc.status == 404 else None
        if why and why.startswith("skill "):
            raise CliError(why) from None
        if why:
            raise CliError(f"{exc}; {why}") from None
        raise
    print_line(
        "run ",
        (str(r["id"]), "bold"),
        f" queued ({r['skill']}). Follow it: pizzabot show {r['id']}",
    )


@app.command()
def runs(
    url: UrlOpt = None,
    token: TokenOpt = None,
    limit: Annotated[int, typer.Option(help="How many, newest first", min=1, max=1000)] = 30,
    as_json: JsonOpt = False,
) -> None:
    """List recent runs."""
    data = call(url, token, "GET", "/api/runs", params={"limit": limit})
    if as_json:
        dump_json(data)
        return
    if not data["items"]:
        empty("runs")
        return
    console.print(
        table(
            [
                id_column(),
                "what",
                "skill",
                "status",
                "trigger",
                "tokens",
                "steps",
                time_column("created"),
            ],
            (
                [
                    r["id"],
                    _what(r.get("input") or ""),
                    r["skill"],
                    r["status"],
                    r["trigger"],
                    str(r["usage"]["tokens"]),
                    str(r["usage"]["steps"]),
                    when(r["created_at"]),
                ]
                for r in data["items"]
            ),
        )
    )


def _what(text: str) -> str:
    """A run by its input's first line: a request's run by the request's title."""
    first = (text.strip().splitlines() or [""])[0]
    return first if len(first) <= 60 else first[:59] + "…"


@app.command()
def show(run_id: str, url: UrlOpt = None, token: TokenOpt = None, as_json: JsonOpt = False) -> None:
    """Show a run and its timeline: model calls, who decided what via which channel, results."""
    r = call(url, token, "GET", f"/api/runs/{quote(ids.run_id(url, token, run_id), safe='')}")
    if as_json:
        dump_json(r)
        return
    timeline(r)


@app.command()
def cancel(run_id: str, url: UrlOpt = None, token: TokenOpt = None) -> None:
    """Cancel a run."""
    r = call(
        url, token, "POST", f"/api/runs/{quote(ids.run_id(url, token, run_id), safe='')}/cancel"
    )
    print_line(f"{r['id']}: {r['status']}")


@app.command()
def say(run_id: str, text: str, url: UrlOpt = None, token: TokenOpt = None) -> None:
    """Send a follow-up message to a run; a finished run continues with its history."""
    if not text.strip():
        raise CliError("Nothing to say: give the message as TEXT.", code=2)
    r = call(
        url,
        token,
        "POST",
        f"/api/runs/{quote(ids.run_id(url, token, run_id), safe='')}/messages",
        json={"text": text},
    )
    print_line(f"{r['id']}: {r['status']}")
