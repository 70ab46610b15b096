"""`pizzabot`: the server (`serve`, `worker`) and a client of its HTTP API for everything else,
so a terminal on another device works the same way (`--url`, `--token`)."""

from __future__ import annotations

import contextlib
import json
import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import quote

import typer
from rich.table import Column
from rich.text import Text

from bot.cli_ask import register as register_ask
from bot.cli_client import Api, ApiError, CliError, connect
from bot.cli_render import (
    arg_lines,
    compact,
    console,
    dump_json,
    empty,
    id_column,
    item_card,
    table,
    text_column,
    time_column,
    timeline,
    when,
)
from bot.cli_typer import App, stderr

app = App(
    help="Pizza Bot: an inbox for your AI agents' background work.",
    no_args_is_help=True,
    add_completion=False,
)

UrlOpt = Annotated[str | None, typer.Option("--url", help="Server URL (env PIZZABOT_URL)")]
TokenOpt = Annotated[str | None, typer.Option("--token", help="API token (env PIZZABOT_API_TOKEN)")]


# -- server ------------------------------------------------------------------------------


@app.command()
def serve(
    host: Annotated[
        str | None, typer.Option(help="Address to listen on (env PIZZABOT_HOST)")
    ] = None,
    port: Annotated[int | None, typer.Option(help="Port (env PIZZABOT_PORT)")] = None,
    skills: Annotated[
        Path | None, typer.Option("--skills", help="Skills folder (env PIZZABOT_SKILLS_DIR)")
    ] = None,
    data_dir: Annotated[
        Path | None, typer.Option(help="Data folder (env PIZZABOT_DATA_DIR)")
    ] = None,
    no_worker: Annotated[
        bool, typer.Option("--no-worker", help="Serve API and channels only")
    ] = False,
) -> None:
    """Start the server: API, web page, channels and (unless --no-worker) a worker."""
    from bot import banner, listen
    from bot.boot import BootApp
    from bot.logs import setup_logging
    from bot.settings import Settings

    overrides: dict[str, Any] = {
        k: v
        for k, v in {"host": host, "port": port, "skills_dir": skills, "data_dir": data_dir}.items()
        if v is not None
    }
    settings = Settings(**overrides)
    setup_logging(settings)
    token, created = settings.ensure_token()
    setup_logging(settings, token=token)  # the token made just now is a secret of the logs too

    def build() -> Any:
        from bot.server import create_app

        return create_app(settings, token=token, with_worker=not no_worker)

    def stop() -> None:
        server.should_exit = True

    def stopped(sig: int | None) -> None:
        if app_.ready or sig is not None:
            banner.say(banner.stop_line(sig))

    app_ = BootApp(build, on_failure=stop, on_ready=banner.ready_printer)
    server = banner.Server(
        listen.config(
            app_,
            host=settings.host,
            port=settings.port,
            header_timeout=settings.header_timeout,
            keepalive_timeout=settings.keepalive_timeout,
            max_connections=settings.max_connections,
            trusted_proxies=settings.trusted_proxies,
            log_level="warning",
            access_log=False,
        ),
        on_stop=stopped,
    )
    # stderr often ends in `docker logs` or the journal: the token goes only to a person.
    for line in banner.start_block(
        settings, token=token, created=created, interactive=sys.stderr.isatty()
    ):
        banner.say(line)
    try:
        server.run()
    except KeyboardInterrupt:
        raise typer.Exit(130) from None  # Ctrl-C: the stop line said it all
    if app_.failed is not None:
        raise typer.Exit(1)


@app.command()
def worker() -> None:
    """Run a worker only (no HTTP): claims and steps runs from the shared database."""
    import asyncio

    from bot.logs import setup_logging
    from bot.server import build, follow_skill_files, shutdown, start_worker, warm
    from bot.settings import Settings

    settings = Settings()
    setup_logging(settings)

    async def main() -> None:
        svc = await build(settings, token="", with_worker=True, serving=False)
        assert svc.worker is not None
        start_worker(svc, svc.worker)
        # One line a person (or a supervisor) can wait for: from here on runs are claimed.
        sys.stderr.write(
            f"worker ready: claiming up to {settings.worker_concurrency} runs at once\n"
        )
        sys.stderr.flush()
        svc.spawn(warm(svc), "warm")
        follow_skill_files(svc)  # a worker steps runs with its own copy of the skills
        try:
            await asyncio.gather(*svc.background)
        finally:
            await shutdown(svc)

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main())


# -- client ------------------------------------------------------------------------------

JsonOpt = Annotated[
    bool, typer.Option("--json", help="Print the server's JSON answer as it is, for scripts")
]


class BoxName(StrEnum):
    action = "action"
    unread = "unread"


def _api(url: str | None, token: str | None) -> Api:
    return connect(url, token)


def _call(url: str | None, token: str | None, method: str, path: str, **kw: Any) -> Any:
    return connect(url, token).call(method, path, **kw)


def _say(*parts: str | tuple[str, str]) -> None:
    """One line on stdout; data goes in as plain text, a (text, style) pair is styled."""
    line = Text()
    for p in parts:
        if isinstance(p, tuple):
            line.append(p[0], style=p[1])
        else:
            line.append(p)
    console.print(line, soft_wrap=True)


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
    api = _api(url, token)
    try:
        r = api.call("POST", "/api/runs", json={"skill": skill, "input": text})
    except ApiError as exc:
        why = _refused_skill(api, skill) if exc.status == 404 else None
        if why and why.startswith("skill "):
            raise CliError(why) from None
        if why:
            raise CliError(f"{exc}; {why}") from None
        raise
    _say(
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
    data = _call(url, token, "GET", "/api/runs", params={"limit": limit})
    if as_json:
        dump_json(data)
        return
    if not data["items"]:
        empty("runs")
        return
    console.print(
        table(
            [id_column(), "skill", "status", "trigger", "tokens", "steps", time_column("created")],
            (
                [
                    r["id"],
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


@app.command()
def show(run_id: str, url: UrlOpt = None, token: TokenOpt = None, as_json: JsonOpt = False) -> None:
    """Show a run and its timeline: model calls, who decided what via which channel, results."""
    r = _call(url, token, "GET", f"/api/runs/{quote(run_id, safe='')}")
    if as_json:
        dump_json(r)
        return
    timeline(r)


@app.command()
def item(
    item_id: str, url: UrlOpt = None, token: TokenOpt = None, as_json: JsonOpt = False
) -> None:
    """Show an inbox item's whole card: the run, the tool, its risk, the arguments, the decision."""
    api = _api(url, token)
    it = api.call("GET", f"/api/items/{quote(item_id, safe='')}")
    if as_json:
        dump_json(it)
        return
    try:
        run_ = api.call("GET", f"/api/runs/{quote(str(it['run_id']), safe='')}")
    except ApiError:
        run_ = None  # the card still says everything about the item itself
    item_card(it, run_)


@app.command()
def inbox(
    box: Annotated[BoxName | None, typer.Option(help="Only this box")] = None,
    all_: Annotated[
        bool, typer.Option("--all", help="Also decided and read items, not only open ones")
    ] = False,
    url: UrlOpt = None,
    token: TokenOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """List the inbox: Action items waiting for you, Unread results."""
    params: dict[str, Any] = {"all": "true"} if all_ else {}
    if box is not None:
        params["box"] = box.value
    data = _call(url, token, "GET", "/api/inbox", params=params)
    if as_json:
        dump_json(data)
        return
    if not data["items"]:
        empty("items" if all_ else "open items: --all shows decided and read ones too")
        return
    cols: list[Column | str] = [id_column(), "box"]
    if all_:
        cols.append("status")
    cols += [id_column("run"), text_column("title", ratio=1), text_column("args", ratio=1)]
    rows = []
    for i in data["items"]:
        row = [i["id"], i["box"], *([i["status"]] if all_ else []), i["run_id"], i["title"]]
        rows.append([*row, arg_lines(i["args"])])
    console.print(table(cols, rows))


SeenOpt = Annotated[
    str | None,
    typer.Option(
        "--seen",
        help="The card's digest as `pizzabot item` showed it: the decision counts only if the "
        "item is still as shown (by default, as the command reads it now)",
    ),
]


def _decide(
    url: str | None,
    token: str | None,
    item_id: str,
    body: dict[str, Any],
    *,
    seen: str | None = None,
) -> Any:
    """Decide, bound to the card as it was seen (`seen`), else as it is read here: a change
    in between is refused by the server rather than decided."""
    if seen is None:
        seen = _call(url, token, "GET", f"/api/items/{quote(item_id, safe='')}").get("digest")
    if seen:
        body = {**body, "seen": seen}
    # json.dumps writes 1e999 as Infinity (httpx's json= refuses it): the server then answers
    # with the field's error, as it would to any other client.
    return _call(
        url,
        token,
        "POST",
        f"/api/items/{quote(item_id, safe='')}/decision",
        content=json.dumps(body),
        headers={"content-type": "application/json"},
    )


@app.command()
def approve(
    item: Annotated[str | None, typer.Argument(help="The Action item to approve")] = None,
    run: Annotated[
        str | None, typer.Option("--run", help="With --all: the run whose calls to approve")
    ] = None,
    all_: Annotated[
        bool,
        typer.Option(
            "--all",
            help="Approve every call the run's model asked for together (each on its own; "
            "one that needs more approvers is left out and said so)",
        ),
    ] = False,
    grant: Annotated[
        str | None,
        typer.Option(
            "--grant",
            help="And don't ask again for this tool: run (the rest of this run), a duration "
            "the tool offers (1h), or exact (these arguments, until revoked)",
        ),
    ] = None,
    seen: SeenOpt = None,
    url: UrlOpt = None,
    token: TokenOpt = None,
) -> None:
    """Approve an Action item: the tool runs with the proposed arguments. With --run RUN
    --all: every call of the run's waiting turn."""
    if all_ or run is not None:
        _approve_all(url, token, item, run, all_, grant)
        return
    if item is None:
        raise CliError("Name the item to approve, or give --run RUN --all.", code=2)
    body: dict[str, Any] = {"decision": "approve"}
    if grant is not None:
        body["grant"] = grant
    r = _decide(url, token, item, body, seen=seen)
    _say(f"{r['id']}: {r['status']}")
    _say_count(r)
    if grant is not None:
        _say(f"granted {grant} for {r['tool']}: `pizzabot grants` lists it, `revoke` ends it")


def _approve_all(
    url: str | None,
    token: str | None,
    item: str | None,
    run: str | None,
    all_: bool,
    grant: str | None,
) -> None:
    if item is not None or grant is not None or run is None or not all_:
        raise CliError("Approve all as: pizzabot approve --run RUN --all", code=2)
    r = _call(
        url,
        token,
        "POST",
        f"/api/runs/{quote(run, safe='')}/decisions",
        json={"decision": "approve", "all": True},
    )
    for result in r["results"]:
        i = result["item"]
        said = i["status"] if result["approved"] else f"left out: {result['why']}"
        _say(f"{i['id']}: {i['tool'] or i['title']}: {said}")
    if not r["results"]:
        _say(r["summary"])


def _new_args(
    item: str, set_: list[str] | None, args: str | None, url: str | None, token: str | None
) -> tuple[dict[str, Any], str | None]:
    """The edited arguments, and the digest of the card they were made from (`--set` changes
    the arguments as read now; a change meanwhile is refused, not overwritten)."""
    if args is not None and set_:
        raise CliError("Give --set NAME=VALUE or --args JSON, not both.", code=2)
    if args is not None:
        try:
            new = json.loads(args)
        except json.JSONDecodeError as exc:
            raise CliError(
                f"--args is not valid JSON ({exc.msg} at character {exc.pos + 1}): give an "
                """object, e.g. --args '{"copies": 3}'""",
                code=2,
            ) from None
        if not isinstance(new, dict):
            raise CliError(
                f"--args must be a JSON object of argument names and values, e.g. "
                f"""--args '{{"copies": 3}}' (got {type(new).__name__ if new is not None else "null"})""",
                code=2,
            )
        return new, None
    if not set_:
        raise CliError(
            "Nothing to change: give --set NAME=VALUE (repeatable) or --args JSON "
            f"(`pizzabot item {item}` shows the arguments); to keep them, approve.",
            code=2,
        )
    current = _call(url, token, "GET", f"/api/items/{quote(item, safe='')}")
    new = dict(current.get("args") or {})
    for pair in set_:
        name, eq, value = pair.partition("=")
        if not eq or not name.strip():
            raise CliError(f"--set takes NAME=VALUE (got {pair!r}).", code=2)
        try:
            new[name.strip()] = json.loads(value)
        except json.JSONDecodeError:
            new[name.strip()] = value  # a bare word is text
    return new, current.get("digest")


@app.command()
def edit(
    item: str,
    set_: Annotated[
        list[str] | None,
        typer.Option("--set", help="NAME=VALUE, repeatable; VALUE is JSON or else text"),
    ] = None,
    args: Annotated[
        str | None, typer.Option("--args", help="All the new arguments as a JSON object")
    ] = None,
    seen: SeenOpt = None,
    url: UrlOpt = None,
    token: TokenOpt = None,
) -> None:
    """Edit an Action item's arguments, then let the tool run with them."""
    new, read = _new_args(item, set_, args, url, token)
    r = _decide(url, token, item, {"decision": "edit", "args": new}, seen=seen or read)
    if r["status"] == "pending":  # more than one person must approve: a new count
        _say(f"{r['id']}: edited to {compact(r['args'])}")
        _say_count(r)
        return
    _say(f"{r['id']}: {r['status']} with {compact(r['final_args'])}")


def _say_count(r: dict[str, Any]) -> None:
    """Where more than one person must approve and the count is not reached yet."""
    risk = r.get("risk") or {}
    required = risk.get("approvals_required") or 1
    if r.get("status") == "pending" and required > 1:
        approved = list(risk.get("approved") or [])
        _say(f"{len(approved)} of {required} approved: {', '.join(approved)}")
        _say("another person must approve it")


@app.command()
def reject(
    item: str,
    reason: Annotated[str, typer.Argument(help="Why; the model reads it")] = "",
    seen: SeenOpt = None,
    url: UrlOpt = None,
    token: TokenOpt = None,
) -> None:
    """Reject an Action item, with a reason the model reads."""
    r = _decide(url, token, item, {"decision": "reject", "reason": reason}, seen=seen)
    _say(f"{r['id']}: {r['status']}")


@app.command()
def read(item: str, url: UrlOpt = None, token: TokenOpt = None) -> None:
    """Mark an Unread item read."""
    r = _call(url, token, "POST", f"/api/items/{quote(item, safe='')}/read")
    _say(f"{r['id']}: {r['status']}")


@app.command()
def cancel(run_id: str, url: UrlOpt = None, token: TokenOpt = None) -> None:
    """Cancel a run."""
    r = _call(url, token, "POST", f"/api/runs/{quote(run_id, safe='')}/cancel")
    _say(f"{r['id']}: {r['status']}")


@app.command()
def say(run_id: str, text: str, url: UrlOpt = None, token: TokenOpt = None) -> None:
    """Send a follow-up message to a run; a finished run continues with its history."""
    if not text.strip():
        raise CliError("Nothing to say: give the message as TEXT.", code=2)
    r = _call(
        url, token, "POST", f"/api/runs/{quote(run_id, safe='')}/messages", json={"text": text}
    )
    _say(f"{r['id']}: {r['status']}")


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
        _call(url, token, "DELETE", "/api/kill")
        _say("kill switch lifted")
    else:
        r = _call(url, token, "POST", "/api/kill", json={"reason": reason} if reason else None)
        _say(("kill switch ON", "bold red"), f"; killed {len(r['killed'])} run(s)")


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
        data = _call(url, token, "POST", "/api/skills/reload")
    else:
        data = _call(url, token, "GET", "/api/skills")
    if as_json:
        dump_json(data)
        return
    if reload:
        changes = data["changes"]
        said = [
            f"{k} {', '.join(changes[k])}" for k in ("added", "changed", "removed") if changes[k]
        ]
        _say("reloaded: ", "; ".join(said) or "no skill changed")
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


@app.command()
def audit(
    url: UrlOpt = None,
    token: TokenOpt = None,
    limit: Annotated[int, typer.Option(help="How many, newest first", min=1, max=5000)] = 50,
    as_json: JsonOpt = False,
) -> None:
    """Show the audit trail: who decided, started, cancelled or killed what, and when."""
    data = _call(url, token, "GET", "/api/audit", params={"limit": limit})
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
    data = _call(url, token, "GET", "/api/grants", params={"all": "true"} if all_ else {})
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
    g = _call(url, token, "DELETE", f"/api/grants/{quote(grant_id, safe='')}")
    _say(f"{g['id']}: revoked ({g['covers']})")


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
    made = _call(url, token, "POST", "/api/tokens", json=body)
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
    data = _call(url, token, "GET", "/api/tokens")
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
    t = _call(url, token, "DELETE", f"/api/tokens/{quote(token_id, safe='')}")
    _say(f"{t['id']}: token {t['name']} revoked")


# -- schedules ---------------------------------------------------------------------------

schedules_app = App(
    help="List, add, pause, resume and remove schedules (runs started by the clock).",
    no_args_is_help=False,
)
app.add_typer(schedules_app, name="schedules")


def _schedule_line(s: dict[str, Any]) -> None:
    when_ = s["cron"] or f"every {int(s['every_seconds'] or 0)}s"
    state = "paused" if s["paused"] else when((s["next_fire_times"] or [None])[0]) or "-"
    _say(f"{s['id']}  {s['skill']}  {when_} ({s['timezone']})  next: {state}")


@schedules_app.callback(invoke_without_command=True)
def schedules_list(
    ctx: typer.Context, url: UrlOpt = None, token: TokenOpt = None, as_json: JsonOpt = False
) -> None:
    """List schedules with their next fire times (the default)."""
    if ctx.invoked_subcommand is not None:
        return
    data = _call(url, token, "GET", "/api/schedules")
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
    _schedule_line(_call(url, token, "POST", "/api/schedules", json=body))


@schedules_app.command("pause")
def schedules_pause(schedule_id: str, url: UrlOpt = None, token: TokenOpt = None) -> None:
    """Pause a schedule: no fires until it is resumed (paused time is not a misfire)."""
    _schedule_line(_call(url, token, "POST", f"/api/schedules/{quote(schedule_id, safe='')}/pause"))


@schedules_app.command("resume")
def schedules_resume(schedule_id: str, url: UrlOpt = None, token: TokenOpt = None) -> None:
    """Resume a paused schedule."""
    _schedule_line(
        _call(url, token, "POST", f"/api/schedules/{quote(schedule_id, safe='')}/resume")
    )


@schedules_app.command("remove")
def schedules_remove(schedule_id: str, url: UrlOpt = None, token: TokenOpt = None) -> None:
    """Remove a schedule added through the API or CLI (skill schedules live in their file)."""
    _call(url, token, "DELETE", f"/api/schedules/{quote(schedule_id, safe='')}")
    _say(f"{schedule_id}: removed")


# -- bench -------------------------------------------------------------------------------

BENCH_POSTGRES = "postgresql://postgres@127.0.0.1:5432/postgres"


@app.command()
def bench(
    quick: Annotated[
        bool, typer.Option("--quick", help="Small counts: a smoke test, as CI runs it")
    ] = False,
    output: Annotated[Path, typer.Option(help="Where to write the JSON figures")] = Path(
        "bench-output/bench.json"
    ),
    # Typer's rich help cuts a default longer than its column: the default is said in words.
    postgres: Annotated[
        str,
        typer.Option(
            help="A PostgreSQL server the bench may create scratch databases on "
            "(default: user postgres on 127.0.0.1:5432, database postgres)",
            show_default=False,
        ),
    ] = BENCH_POSTGRES,
    no_postgres: Annotated[
        bool, typer.Option("--no-postgres", help="Skip the PostgreSQL figures")
    ] = False,
    profile: Annotated[
        bool, typer.Option("--profile", help="cProfile the step runs (next to the JSON)")
    ] = False,
    keep: Annotated[bool, typer.Option("--keep", help="Keep the work folder (logs)")] = False,
    only: Annotated[
        list[str] | None,
        typer.Option(
            help="Run only these parts: workers, steps, decisions, memory, start, channels "
            "(with --compare: steps, decisions, memory, start, inflight)"
        ),
    ] = None,
    compare: Annotated[
        str | None,
        typer.Option(help="Beside another engine on the same work: langgraph (its own venv)"),
    ] = None,
) -> None:
    """Measure the engine: step overhead, decision latency, memory, workers, start-up."""
    if compare is not None:
        from bot.bench.compare.cli import compare_command

        compare_command(compare, quick=quick, output=output, keep=keep, only=only)
        return
    from bot.bench import runner as bench_

    unknown = set(only or []) - set(bench_.SECTIONS_ALL)
    if unknown:
        raise CliError(
            f"unknown parts: {', '.join(sorted(unknown))} "
            f"(the parts: {', '.join(bench_.SECTIONS_ALL)})",
            code=2,
        )
    result = bench_.run(
        bench_.Options(
            quick=quick,
            output=output,
            postgres=None if no_postgres else postgres,
            profile=profile,
            keep=keep,
            sections=tuple(only) if only else bench_.SECTIONS_ALL,
        )
    )
    if result["errors"]:
        raise CliError(f"bench parts failed: {', '.join(result['errors'])}")
    if result["figures"]["claimed_twice"]:
        raise CliError("runs were executed twice")


register_ask(app)


def main() -> None:
    app(prog_name="pizzabot")


if __name__ == "__main__":
    main()
