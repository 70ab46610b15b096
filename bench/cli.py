"""`python -m bench` (`make bench`): the benchmark's command, a development tool beside the
server, never in its wheel."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from pizzabot.cli.client import CliError
from pizzabot.cli.typer_app import App

app = App(
    help="Measure Pizza Bot: step overhead, decision latency, memory, workers, start-up.",
    add_completion=False,
)

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
    crowd: Annotated[
        list[int] | None,
        typer.Option(help="Also measure the request path with this many requests waiting"),
    ] = None,
    only: Annotated[
        list[str] | None,
        typer.Option(
            help="Run only these parts: workers, steps, decisions, memory, waiting, start, "
            "channels, fanout, requests (with --compare langgraph: steps, decisions, memory, "
            "start, inflight; "
            "alone; with --compare awaithumans: requests)"
        ),
    ] = None,
    compare: Annotated[
        str | None,
        typer.Option(
            help="Beside another engine on the same work: langgraph, awaithumans (each in a "
            "venv of its own)"
        ),
    ] = None,
) -> None:
    """Measure the engine: step overhead, decision latency, memory, workers, start-up."""
    if compare is not None:
        from bench.compare.cli import compare_command

        pg = None if no_postgres else postgres
        compare_command(compare, quick=quick, output=output, keep=keep, only=only, postgres=pg)
        return
    from bench import runner as bench_

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
            crowds=tuple(crowd or ()),
        )
    )
    if result["errors"]:
        raise CliError(f"bench parts failed: {', '.join(result['errors'])}")
    if result["figures"]["claimed_twice"]:
        raise CliError("runs were executed twice")


def main() -> None:
    app(prog_name="python -m bench")
