"""`pizzabot`: the server (`serve`, `worker`) beside the client commands of `cli`.

The server's commands live here (`audit …`, `policy test`, `backup`, `restore`: `store.admin`);
every other command is a client of the HTTP API (`cli`), which imports nothing of the server.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from pizzabot.cli import app
from pizzabot.cli.control import audit_app
from pizzabot.store.admin import register as register_admin

__all__ = ["app", "main"]


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
    from pizzabot.bot.logs import setup_logging
    from pizzabot.bot.settings import Settings

    overrides: dict[str, Any] = {
        k: v
        for k, v in {"host": host, "port": port, "skills_dir": skills, "data_dir": data_dir}.items()
        if v is not None
    }
    settings = Settings(**overrides)
    setup_logging(settings)
    token, created = settings.ensure_token()
    setup_logging(settings, token=token)  # the token made just now is a secret of the logs too
    _run_server(settings, token=token, created=created, with_worker=not no_worker)


def _run_server(settings: Any, *, token: str, created: bool, with_worker: bool) -> None:
    """Listen at once (the app is built behind `/healthz` while it starts), say so, and run
    until stopped."""
    from pizzabot.bot import banner, listen
    from pizzabot.bot.boot import BootApp

    async def build(stack: contextlib.AsyncExitStack) -> Any:
        # The skills' MCP servers start first; imports are on a thread (/healthz answers).
        mcp_servers = await asyncio.to_thread(importlib.import_module, "pizzabot.bot.mcp_servers")
        hub = await mcp_servers.start_first(settings)
        stack.push_async_callback(hub.aclose)  # the app's services close it first, if built

        def make_app() -> Any:
            from pizzabot.bot.server import create_app

            return create_app(settings, token=token, with_worker=with_worker, tools=hub)

        return await asyncio.to_thread(make_app)

    def stop() -> None:
        server.should_exit = True

    def exiting() -> None:  # the web page's held asks are answered: a stop waits for none
        with contextlib.suppress(RuntimeError, AttributeError):  # not built yet, or no loop
            live = app_.built.state.services.live
            asyncio.get_running_loop().call_soon_threadsafe(live.close)

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
        on_exit=exiting,
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

    from pizzabot.bot.logs import setup_logging
    from pizzabot.bot.mcp_servers import start_first
    from pizzabot.bot.server import build, follow_skill_files, shutdown, start_worker, warm
    from pizzabot.bot.settings import Settings

    settings = Settings()
    setup_logging(settings)

    async def main() -> None:
        # The skills' MCP servers start while it builds (a failed start stops them with the loop).
        tools = await start_first(settings)
        svc = await build(settings, token="", with_worker=True, serving=False, tools=tools)
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


@app.command(
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
    add_help_option=False,
)
def bench(ctx: typer.Context) -> None:
    """Measure the engine (a development tool: from a checkout, `make bench`; `pizzabot bench
    --help` lists its options)."""
    try:
        from bench.cli import app as bench_app
    except ImportError:
        raise typer.BadParameter(
            "the benchmark is a development tool, not installed with the server: run it from "
            "a checkout of the repository (make bench)"
        ) from None
    bench_app(args=list(ctx.args), prog_name="pizzabot bench")


def _where() -> Any:
    from pizzabot.bot.settings import Settings
    from pizzabot.store.audit_otlp import logs_endpoint
    from pizzabot.store.backup import Where

    s = Settings()
    otlp = logs_endpoint(os.environ)
    return Where(s.db_url, s.data_dir, s.audit_key_path, otlp_logs=otlp, skills_dir=s.skills_dir)


# audit verify/export, policy test, backup, restore: on the server's host, with the database
register_admin(app, audit_app, where=_where)


def main() -> None:
    app(prog_name="pizzabot")


if __name__ == "__main__":
    main()
