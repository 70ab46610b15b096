"""`pizzabot bench --compare NAME`: the command's checks before the comparison runs, kept here
so the CLI module only hands over."""

from __future__ import annotations

from pathlib import Path

from pizzabot.cli.client import CliError

ENGINES = ("langgraph",)


def compare_command(
    engine: str, *, quick: bool, output: Path, keep: bool, only: list[str] | None
) -> None:
    from bench.compare import run

    if engine not in ENGINES:
        raise CliError(
            f"--compare: unknown engine {engine!r} (known: {', '.join(ENGINES)})", code=2
        )
    unknown = set(only or []) - set(run.PARTS)
    if unknown:
        raise CliError(
            f"unknown parts: {', '.join(sorted(unknown))} (the parts: {', '.join(run.PARTS)})",
            code=2,
        )
    # The plain bench's JSON is bench.json; the comparison's sits beside it.
    if output == Path("bench-output/bench.json"):
        output = output.with_name("compare-langgraph.json")
    result = run.run(
        run.Options(
            quick=quick,
            output=output,
            keep=keep,
            parts=tuple(p for p in run.PARTS if p in only) if only else run.PARTS,
        )
    )
    if result["errors"]:
        raise CliError(f"bench parts failed: {', '.join(result['errors'])}")
