"""`pizzabot kill`, `skills`, `audit`: keeping the server under control."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.text import Text

from pizzabot.cli.common import JsonOpt, TokenOpt, UrlOpt, app, call, print_line
from pizzabot.cli.render import (
    arg_lines,
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


@app.command()
def kill(
    off: Annotated[bool, typer.Option("--off", help="Lift the kill switch")] = False,
    reason: Annotated[
        str | None,
        typer.Option("--reason", help="Why: every held request's agent is told, and every refusal"),
    ] = None,
    url: UrlOpt = None,
    token: TokenOpt = None,
) -> None:
    """Stop every running run, refuse new ones and hold every decision (--off lifts it)."""
    if off:
        call(url, token, "DELETE", "/api/kill")
        print_line("kill switch lifted")
    else:
        r = call(url, token, "POST", "/api/kill", json={"reason": reason} if reason else None)
        print_line(("kill switch ON", "bold red"), f"; killed {len(r['killed'])} run(s)")


@app.command()
def skills(
    reload: Annotated[
        bool,
        typer.Option(
            "--reload",
            help="Load the skills folder again now (the server also does when a file changes)",
        ),
    ] = False,
    url: UrlOpt = None,
    token: TokenOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """List the skills the server loaded, and the files it refused (and why)."""
    if reload:
        data = call(url, token, "POST", "/api/skills/reload")
    else:
        data = call(url, token, "GET", "/api/skills")
    if as_json:
        dump_json(data)
        return
    if reload:
        changes = data["changes"]
        said = [
            f"{k} {', '.join(changes[k])}" for k in ("added", "changed", "removed") if changes[k]
        ]
        print_line("reloaded: ", "; ".join(said) or "no skill changed")
    if data["items"]:
        console.print(
            table(
                ["name", "model", "servers", text_column("description", ratio=1)],
                (
                    [s["name"], s["model"], ", ".join(s.get("servers") or []), s["description"]]
                    for s in data["items"]
                ),
            )
        )
    else:
        empty("skills loaded")
    for e in data.get("errors") or []:
        _refusal(e)


def _refusal(e: dict[str, Any]) -> None:
    """A refused file on stderr: one line for one problem, else a line per problem."""
    problems = e.get("problems") or []
    if len(problems) > 1:
        head = f"{e['path']}: {len(problems)} problems"
        lines = [
            f"  line {p['line']}: {p['message']}" if p.get("line") else f"  {p['message']}"
            for p in problems
        ]
    else:
        line = f":{e['line']}" if e.get("line") else ""
        head, lines = f"{e['path']}{line}: {e['message']}", []
    stderr.print(Text.assemble(("refused: ", "bold red"), head), soft_wrap=True)
    for text in lines:
        stderr.print(text, soft_wrap=True)
    if e.get("kept"):
        stderr.print(
            f"  skill {e['kept']} keeps running its last good version until the file is fixed",
            soft_wrap=True,
        )


#: `pizzabot audit` lists; the server's host adds `audit verify` and `audit export`
#: (`pizzabot.bot.main`), which read the database itself.
audit_app = App(help="The audit trail (verify and export: on the server's host).")
app.add_typer(audit_app, name="audit")


@audit_app.callback(invoke_without_command=True)
def audit(
    ctx: typer.Context,
    url: UrlOpt = None,
    token: TokenOpt = None,
    limit: Annotated[int, typer.Option(help="How many, newest first", min=1, max=5000)] = 50,
    as_json: JsonOpt = False,
) -> None:
    """Show the audit trail: who decided, started, cancelled or killed what, and when."""
    if ctx.invoked_subcommand is not None:
        return
    data = call(url, token, "GET", "/api/audit", params={"limit": limit})
    if as_json:
        dump_json(data)
        return
    if not data["items"]:
        empty("audit entries")
        return
    console.print(
        table(
            [
                time_column("at"),
                "action",
                "actor",
                "channel",
                id_column("run"),
                id_column("item"),
                text_column("detail", ratio=1),
            ],
            (
                [
                    when(e["at"]),
                    e["action"],
                    e["actor"],
                    e["channel"],
                    e["run_id"] or "",
                    e["item_id"] or "",
                    arg_lines(e["detail"]),
                ]
                for e in data["items"]
            ),
        )
    )
