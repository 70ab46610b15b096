"""`pizzabot bench --compare NAME`: the command's checks before the comparison runs, kept here
so the CLI module only hands over."""

from __future__ import annotations

from pathlib import Path

from pizzabot.cli.client import CliError

ENGINES = ("langgraph", "awaithumans")


def _parts(only: list[str] | None, known: tuple[str, ...]) -> tuple[str, ...]:
    unknown = set(only or []) - set(known)
    if unknown:
        raise CliError(
            f"unknown parts: {', '.join(sorted(unknown))} (the parts: {', '.join(known)})",
            code=2,
        )
    return tuple(p for p in known if p in only) if only else known


def compare_command(
    engine: str,
    *,
    quick: bool,
    output: Path,
    keep: bool,
    only: list[str] | None,
    postgres: str | None = None,
) -> None:
    if engine not in ENGINES:
        raise CliError(
            f"--compare: unknown engine {engine!r} (known: {', '.join(ENGINES)})", code=2
        )
    # The plain bench's JSON is bench.json; the comparison's sits beside it.
    if output == Path("bench-output/bench.json"):
        output = output.with_name(f"compare-{engine}.json")
    if engine == "awaithumans":
        from bench.compare import hitl

        parts = _parts(only, hitl.PARTS)
        result = hitl.run(hitl.Options(quick=quick, output=output, keep=keep, parts=parts))
    else:
        from bench.compare import run

        parts = _parts(only, run.PARTS)
        result = run.run(
            run.Options(quick=quick, output=output, keep=keep, parts=parts, postgres=postgres)
        )
    if result["errors"]:
        raise CliError(f"bench parts failed: {', '.join(result['errors'])}")
