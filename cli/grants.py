"""`pizzabot grants`, `revoke`, and `pizzabot tokens …`: what stands in for asking a person,
and the named tokens agents and devices hold."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any
from urllib.parse import quote

import typer

from pizzabot.cli.common import JsonOpt, TokenOpt, UrlOpt, app, call, print_line
from pizzabot.cli.render import (
    compact,
    console,
    dump_json,
    empty,
    id_column,
    table,
    text_column,
    time_column,
    when,
)
from pizzabot.cli.typer_app import App, stderr

# -- grants ------------------------------------------------------------------------------


@app.command()
def grants(
    all_: Annotated[
        bool, typer.Option("--all", help="Also revoked and expired grants, and ended runs'")
    ] = False,
    url: UrlOpt = None,
    token: TokenOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """List grants: approvals that said "don't ask again" for a run, a while, or exact
    arguments."""
    data = call(url, token, "GET", "/api/grants", params={"all": "true"} if all_ else {})
    if as_json:
        dump_json(data)
        return
    if not data["items"]:
        empty("grants" if all_ else "grants in force: --all shows revoked and expired ones too")
        return
    console.print(
        table(
            [
                id_column(),
                "tool",
                text_column("for", ratio=1),
                "by",
                "uses",
                time_column("until"),
                *(["ended"] if all_ else []),
            ],
            (
                [
                    g["id"],
                    g["tool"],
                    _grant_for(g),
                    f"{g['granted_by']} via {g['granted_via']}",
                    str(g["uses"]),
                    _until(g),
                    *([_ended(g)] if all_ else []),
                ]
                for g in data["items"]
            ),
        )
    )


def _grant_for(g: dict[str, Any]) -> str:
    match g["scope"]:
        case "run":
            return f"the rest of run {g['run_id']}"
        case "exact":
            return f"these arguments in skill {g['skill']}: {compact(g['args'])}"
        case _:
            return f"{g['choice']} in skill {g['skill']}"


def _until(g: dict[str, Any]) -> str:
    if g["expires_at"]:
        return when(g["expires_at"])
    return "the run ends" if g["scope"] == "run" else "revoked"


def _ended(g: dict[str, Any]) -> str:
    if g["revoked_at"]:
        return f"revoked by {g['revoked_by']}"
    return "" if g["holds"] else "expired"


@app.command()
def revoke(grant_id: str, url: UrlOpt = None, token: TokenOpt = None) -> None:
    """Revoke a grant: the next call it would have covered asks again."""
    g = call(url, token, "DELETE", f"/api/grants/{quote(grant_id, safe='')}")
    print_line(f"{g['id']}: revoked ({g['covers']})")


# -- tokens ------------------------------------------------------------------------------

tokens_app = App(
    help="Named tokens, each with the least scope it needs: ask (an agent that asks), decide "
    "(a person's device, deciding as that person), admin.",
    no_args_is_help=True,
)
app.add_typer(tokens_app, name="tokens")


class TokenScope(StrEnum):
    ask = "ask"
    decide = "decide"
    admin = "admin"


@tokens_app.command("create")
def tokens_create(
    name: Annotated[str, typer.Argument(help="What holds it: claude-hook, alice-phone, …")],
    scope: Annotated[
        TokenScope,
        typer.Option(
            "--scope",
            help="ask: file requests and read its own (agents, hooks, MCP clients); decide: "
            "also decide as --person; admin: everything",
        ),
    ],
    person: Annotated[
        str | None,
        typer.Option("--person", help="The person (from people:) a decide token decides as"),
    ] = None,
    url: UrlOpt = None,
    token: TokenOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Make a named token. Its secret is printed once: keep it where its holder reads it."""
    body: dict[str, Any] = {"name": name, "scope": str(scope)}
    if person is not None:
        body["person"] = person
    made = call(url, token, "POST", "/api/tokens", json=body)
    if as_json:
        dump_json(made)
        return
    who = f" as {made['person']}" if made["person"] else ""
    # Only the secret on stdout, so `$(pizzabot tokens create …)` captures it.
    stderr.print(
        f"{made['id']}: token {made['name']} ({made['scope']}{who}); its secret, shown once:"
    )
    print(made["token"])


@tokens_app.command("list")
def tokens_list(url: UrlOpt = None, token: TokenOpt = None, as_json: JsonOpt = False) -> None:
    """List the named tokens (never their secrets), revoked ones too."""
    data = call(url, token, "GET", "/api/tokens")
    if as_json:
        dump_json(data)
        return
    if not data["items"]:
        empty("tokens: `pizzabot tokens create NAME --scope ask` makes one")
        return
    console.print(
        table(
            [id_column(), "name", "scope", "person", time_column("made"), "revoked"],
            (
                [
                    t["id"],
                    t["name"],
                    t["scope"],
                    t["person"] or "",
                    when(t["created_at"]),
                    f"by {t['revoked_by']}" if t["revoked_at"] else "",
                ]
                for t in data["items"]
            ),
        )
    )


@tokens_app.command("revoke")
def tokens_revoke(token_id: str, url: UrlOpt = None, token: TokenOpt = None) -> None:
    """Revoke a token: every server refuses it from now on."""
    t = call(url, token, "DELETE", f"/api/tokens/{quote(token_id, safe='')}")
    print_line(f"{t['id']}: token {t['name']} revoked")
