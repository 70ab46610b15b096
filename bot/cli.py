"""`pizzabot`: the server (`serve`, `worker`) and a client of its HTTP API for everything else,
so a terminal on another device works the same way (`--url`, `--token`)."""

from __future__ import annotations

import contextlib
import json
import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Column, Table

app = typer.Typer(
    help="Pizza Bot: an inbox for your AI agents' background work.",
    no_args_is_help=True,
    add_completion=False,
)
console = Console()
err = Console(stderr=True)

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
    import uvicorn

    from bot import listen
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

    def build() -> Any:
        from bot.server import create_app

        return create_app(settings, token=token, with_worker=not no_worker)

    def stop() -> None:
        server.should_exit = True

    app_ = BootApp(build, on_failure=stop)
    server = uvicorn.Server(
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
        )
    )
    base = f"http://{settings.host}:{settings.port}"
    token_file = settings.data_dir / "api-token"
    where = "from PIZZABOT_API_TOKEN" if settings.api_token else f"kept in {token_file}"
    err.print(
        f"[bold]Pizza Bot[/] on {base}  (data: {settings.data_dir}; token {where}"
        f"{', new' if created else ''})"
    )
    # stderr often ends in `docker logs` or the journal: the token goes only to a person.
    if sys.stderr.isatty():
        err.print(f"  Open the inbox: {base}/login?token={token}")
    else:
        err.print(f"  Open the inbox: {base}/login (with the token {where})")
    err.print(
        f"  CLI/API: export PIZZABOT_API_TOKEN=$(cat {token_file})"
        if not settings.api_token
        else "  CLI/API: use the token from PIZZABOT_API_TOKEN"
    )
    server.run()
    if app_.failed is not None:
        raise typer.Exit(1)


@app.command()
def worker() -> None:
    """Run a worker only (no HTTP): claims and steps runs from the shared database."""
    import asyncio

    from bot.logs import setup_logging
    from bot.server import build, shutdown, start_worker, warm
    from bot.settings import Settings

    settings = Settings()
    setup_logging(settings)

    async def main() -> None:
        svc = await build(settings, token="", with_worker=True)
        assert svc.worker is not None
        start_worker(svc, svc.worker)
        svc.spawn(warm(svc), "warm")
        try:
            await asyncio.gather(*svc.background)
        finally:
            await shutdown(svc)

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main())


# -- client ------------------------------------------------------------------------------


def _id_column(header: str = "id") -> Column:
    """Ids are what people type back (`pizzabot approve ID`): never cut them short."""
    return Column(header, no_wrap=True, min_width=16)


def _client(url: str | None, token: str | None) -> Any:
    import httpx

    url = url or os.environ.get("PIZZABOT_URL") or "http://127.0.0.1:8787"
    token = token or os.environ.get("PIZZABOT_API_TOKEN")
    if not token:
        data = Path(
            os.environ.get("PIZZABOT_DATA_DIR") or Path.home() / ".local" / "share" / "pizzabot"
        )
        path = data / "api-token"
        if path.exists():
            token = path.read_text().strip()
    if not token:
        err.print("[red]No API token:[/] pass --token or set PIZZABOT_API_TOKEN")
        raise typer.Exit(2)
    return httpx.Client(
        base_url=url.rstrip("/"), headers={"Authorization": f"Bearer {token}"}, timeout=30
    )


def _call(url: str | None, token: str | None, method: str, path: str, **kw: Any) -> Any:
    import httpx

    with _client(url, token) as c:
        try:
            r = c.request(method, path, **kw)
        except httpx.HTTPError as exc:
            err.print(f"[red]Cannot reach the server:[/] {exc}")
            raise typer.Exit(1) from None
    if r.status_code >= 400:
        try:
            detail = r.json().get("detail")
        except ValueError:
            detail = r.text
        if isinstance(detail, dict):
            errors = detail.get("errors") or {}
            detail = (
                detail.get("message", "")
                if not errors
                else "invalid arguments"
                + "".join(f"\n  {k or '(arguments)'}: {v}" for k, v in errors.items())
            )
        err.print(f"[red]{r.status_code}:[/] {detail}")
        raise typer.Exit(1)
    return r.json()


@app.command()
def run(
    skill: str,
    text: Annotated[str, typer.Argument(help="What to do")] = "",
    url: UrlOpt = None,
    token: TokenOpt = None,
) -> None:
    """Start a run of SKILL with TEXT as its input."""
    r = _call(url, token, "POST", "/api/runs", json={"skill": skill, "input": text})
    console.print(
        f"run [bold]{r['id']}[/] queued ({r['skill']}). Follow it: pizzabot show {r['id']}"
    )


@app.command()
def runs(url: UrlOpt = None, token: TokenOpt = None, limit: int = 30) -> None:
    """List recent runs."""
    data = _call(url, token, "GET", "/api/runs", params={"limit": limit})
    t = Table(_id_column(), "skill", "status", "trigger", "tokens", "steps", "created")
    for r in data["items"]:
        t.add_row(
            r["id"],
            r["skill"],
            r["status"],
            r["trigger"],
            str(r["usage"]["tokens"]),
            str(r["usage"]["steps"]),
            r["created_at"][:19],
        )
    console.print(t)


@app.command()
def show(run_id: str, url: UrlOpt = None, token: TokenOpt = None) -> None:
    """Show a run and its timeline."""
    r = _call(url, token, "GET", f"/api/runs/{run_id}")
    console.print(
        f"[bold]{r['id']}[/] {r['skill']} — {r['status']}  tokens {r['usage']['tokens']}, "
        f"steps {r['usage']['steps']}"
    )
    for e in r["events"]:
        console.print(f"  {e['at'][11:19]} [cyan]{e['kind']}[/] {json.dumps(e['data'])[:160]}")
    if r.get("result"):
        console.print(f"\n{r['result']}")
    if r.get("error"):
        console.print(f"\n[red]{r['error']}[/]")


@app.command()
def inbox(
    box: Annotated[str | None, typer.Option(help="action or unread")] = None,
    url: UrlOpt = None,
    token: TokenOpt = None,
) -> None:
    """List the inbox: Action items waiting for you, Unread results."""
    data = _call(url, token, "GET", "/api/inbox", params={"box": box} if box else {})
    t = Table(_id_column(), "box", _id_column("run"), "title", "args")
    for i in data["items"]:
        t.add_row(
            i["id"],
            i["box"],
            i["run_id"],
            i["title"],
            json.dumps(i["args"])[:80] if i["args"] else "",
        )
    console.print(t)


@app.command()
def approve(item: str, url: UrlOpt = None, token: TokenOpt = None) -> None:
    """Approve an Action item: the tool runs with the proposed arguments."""
    r = _call(url, token, "POST", f"/api/items/{item}/decision", json={"decision": "approve"})
    console.print(f"{r['id']}: {r['status']}")


@app.command()
def edit(
    item: str,
    set_: Annotated[
        list[str] | None, typer.Option("--set", help="name=value (JSON values allowed)")
    ] = None,
    args: Annotated[
        str | None, typer.Option("--args", help="The new arguments as a JSON object")
    ] = None,
    url: UrlOpt = None,
    token: TokenOpt = None,
) -> None:
    """Edit an Action item's arguments, then let the tool run with them."""
    if args is not None:
        new = json.loads(args)
    else:
        current = _call(url, token, "GET", f"/api/items/{item}")
        new = dict(current.get("args") or {})
        for pair in set_ or []:
            name, _, value = pair.partition("=")
            try:
                new[name] = json.loads(value)
            except ValueError:  # not JSON, or a number Python will not read: send the text
                new[name] = value
    # Written with Infinity allowed, so a number out of range gets the server's field error.
    body = json.dumps({"decision": "edit", "args": new})
    headers = {"Content-Type": "application/json"}
    r = _call(url, token, "POST", f"/api/items/{item}/decision", content=body, headers=headers)
    console.print(f"{r['id']}: {r['status']} with {json.dumps(r['final_args'])}")


@app.command()
def reject(
    item: str,
    reason: Annotated[str, typer.Argument(help="Why; the model reads it")] = "",
    url: UrlOpt = None,
    token: TokenOpt = None,
) -> None:
    """Reject an Action item, with a reason the model reads."""
    r = _call(
        url,
        token,
        "POST",
        f"/api/items/{item}/decision",
        json={"decision": "reject", "reason": reason},
    )
    console.print(f"{r['id']}: {r['status']}")


@app.command()
def read(item: str, url: UrlOpt = None, token: TokenOpt = None) -> None:
    """Mark an Unread item read."""
    _call(url, token, "POST", f"/api/items/{item}/read")


@app.command()
def cancel(run_id: str, url: UrlOpt = None, token: TokenOpt = None) -> None:
    """Cancel a run."""
    r = _call(url, token, "POST", f"/api/runs/{run_id}/cancel")
    console.print(f"{r['id']}: {r['status']}")


@app.command()
def say(run_id: str, text: str, url: UrlOpt = None, token: TokenOpt = None) -> None:
    """Send a follow-up message to a run; a finished run continues with its history."""
    r = _call(url, token, "POST", f"/api/runs/{run_id}/messages", json={"text": text})
    console.print(f"{r['id']}: {r['status']}")


@app.command()
def kill(
    off: Annotated[bool, typer.Option("--off", help="Lift the kill switch")] = False,
    url: UrlOpt = None,
    token: TokenOpt = None,
) -> None:
    """Stop every running run and refuse new ones (--off lifts it)."""
    if off:
        _call(url, token, "DELETE", "/api/kill")
        console.print("kill switch lifted")
    else:
        r = _call(url, token, "POST", "/api/kill")
        console.print(f"kill switch ON; killed {len(r['killed'])} run(s)")


@app.command()
def skills(url: UrlOpt = None, token: TokenOpt = None) -> None:
    """List the skills the server loaded, and the files it refused."""
    data = _call(url, token, "GET", "/api/skills")
    t = Table("name", "model", "description")
    for s in data["items"]:
        t.add_row(s["name"], s["model"], s["description"])
    console.print(t)
    for e in data["errors"]:
        err.print(f"[red]not loaded:[/] {e['path']}:{e['line']}: {e['message']}")


@app.command()
def audit(url: UrlOpt = None, token: TokenOpt = None, limit: int = 50) -> None:
    """Show the audit trail."""
    data = _call(url, token, "GET", "/api/audit", params={"limit": limit})
    t = Table("at", "action", "actor", "channel", "run", "item", "detail")
    for e in data["items"]:
        t.add_row(
            e["at"][:19],
            e["action"],
            e["actor"],
            e["channel"],
            e["run_id"] or "",
            e["item_id"] or "",
            json.dumps(e["detail"])[:60],
        )
    console.print(t)


# -- schedules ---------------------------------------------------------------------------

schedules_app = typer.Typer(
    help="List, add, pause, resume and remove schedules (runs started by the clock).",
    no_args_is_help=False,
)
app.add_typer(schedules_app, name="schedules")


def _schedule_line(s: dict[str, Any]) -> str:
    when = s["cron"] or f"every {int(s['every_seconds'] or 0)}s"
    state = "paused" if s["paused"] else (s["next_fire_times"] or ["-"])[0][:25]
    return f"{s['id']}  {s['skill']}  {when} ({s['timezone']})  next: {state}"


@schedules_app.callback(invoke_without_command=True)
def schedules_list(ctx: typer.Context, url: UrlOpt = None, token: TokenOpt = None) -> None:
    """List schedules with their next fire times (the default)."""
    if ctx.invoked_subcommand is not None:
        return
    data = _call(url, token, "GET", "/api/schedules")
    t = Table(_id_column(), "skill", "when", "misfire", "source", "next fire", "last fire")
    for s in data["items"]:
        last = s["last_fire"]
        t.add_row(
            s["id"],
            s["skill"],
            (s["cron"] or f"every {int(s['every_seconds'] or 0)}s") + f" {s['timezone']}",
            s["misfire"],
            s["source"],
            "paused" if s["paused"] else ", ".join(x[:19] for x in s["next_fire_times"][:2]),
            f"{last['fire_time'][:19]} {last['status']}" if last else "",
        )
    console.print(t)
    for e in data.get("errors", []):
        err.print(f"[red]schedule not loaded:[/] skill {e['skill']}: {e['message']}")


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
    console.print(_schedule_line(_call(url, token, "POST", "/api/schedules", json=body)))


@schedules_app.command("pause")
def schedules_pause(schedule_id: str, url: UrlOpt = None, token: TokenOpt = None) -> None:
    """Pause a schedule: no fires until it is resumed (paused time is not a misfire)."""
    console.print(_schedule_line(_call(url, token, "POST", f"/api/schedules/{schedule_id}/pause")))


@schedules_app.command("resume")
def schedules_resume(schedule_id: str, url: UrlOpt = None, token: TokenOpt = None) -> None:
    """Resume a paused schedule."""
    console.print(_schedule_line(_call(url, token, "POST", f"/api/schedules/{schedule_id}/resume")))


@schedules_app.command("remove")
def schedules_remove(schedule_id: str, url: UrlOpt = None, token: TokenOpt = None) -> None:
    """Remove a schedule added through the API or CLI (skill schedules live in their file)."""
    _call(url, token, "DELETE", f"/api/schedules/{schedule_id}")
    console.print(f"{schedule_id}: removed")


# -- bench -------------------------------------------------------------------------------


@app.command()
def bench(
    quick: Annotated[
        bool, typer.Option("--quick", help="Small counts: a smoke test, as CI runs it")
    ] = False,
    output: Annotated[Path, typer.Option(help="Where to write the JSON figures")] = Path(
        "bench-output/bench.json"
    ),
    postgres: Annotated[
        str,
        typer.Option(help="A PostgreSQL server the bench may create scratch databases on"),
    ] = "postgresql://postgres@127.0.0.1:5432/postgres",
    no_postgres: Annotated[
        bool, typer.Option("--no-postgres", help="Skip the PostgreSQL figures")
    ] = False,
    profile: Annotated[
        bool, typer.Option("--profile", help="cProfile the step runs (next to the JSON)")
    ] = False,
    keep: Annotated[bool, typer.Option("--keep", help="Keep the work folder (logs)")] = False,
    only: Annotated[
        list[str] | None,
        typer.Option(help="Run only these parts: workers, steps, decisions, memory, start"),
    ] = None,
) -> None:
    """Measure the engine: step overhead, decision latency, memory, workers, start-up."""
    from bot import bench as bench_

    unknown = set(only or []) - set(bench_.SECTIONS_ALL)
    if unknown:
        err.print(f"[red]unknown parts:[/] {', '.join(sorted(unknown))}")
        raise typer.Exit(2)
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
        err.print(f"[red]bench parts failed:[/] {', '.join(result['errors'])}")
        raise typer.Exit(1)
    if result["figures"]["claimed_twice"]:
        err.print("[red]runs were executed twice[/]")
        raise typer.Exit(1)


def main() -> None:
    app(prog_name="pizzabot")


if __name__ == "__main__":
    main()
