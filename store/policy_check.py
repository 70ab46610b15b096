"""`pizzabot policy test [SKILLS_DIR] --since 30d`: a proposed set of skills tried on the calls
already made, like a "no new access" check in CI (`pizzabot.agent.policy.replay`).

It runs on the server's host with the server's settings, reading the database itself as
`pizzabot audit verify` does (`pizzabot.store.admin`), because the replay must be the engine's
own: the skill loader and the one verdict (`pizzabot.agent.policy.call_verdict`) run here, on
the proposed files as they are, which a client of the API could not do without sending a
folder of skill files to the server. It writes nothing.

Exit codes: 0 when nothing widens access; 1 when a change does (a call asked or denied
before would run unasked or be allowed, or fewer people would approve it), or the database
cannot be read; 2 for bad input (a skill file the loader refuses, a bad `--since`).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from pizzabot.agent.policy.replay import Replay
    from pizzabot.store.backup import Where
    from pizzabot.store.database import Database

    #: Opens the server's database, checking its schema (`pizzabot.store.admin.open_database`).
    OpenDb = Callable[[Where], Awaitable[Database]]

__all__ = ["register_policy"]


def _fail(message: str, code: int) -> None:
    sys.stderr.write(f"error: {message}\n")
    raise typer.Exit(code)


async def _replay(
    where: Where, open_db: OpenDb, folder: Path, since: datetime, now: datetime
) -> Replay:
    from pizzabot.agent.policy.replay import replay
    from pizzabot.agent.skills.loader import load_skills
    from pizzabot.store.stats import calls_since

    report = load_skills(folder)
    if report.errors:
        lines = [f"{e.path}: {e}" for e in report.errors]
        _fail("the proposed skills do not load:\n  " + "\n  ".join(lines), 2)
    db = await open_db(where)
    try:
        calls = await calls_since(db, since=since, until=now)
    finally:
        await db.aclose()
    return replay(calls, report.skills)


def _print(result: Replay, folder: Path) -> None:
    out = sys.stdout.write
    for c in result.changes:
        mark = "WIDENS" if c.widens else "narrows"
        out(
            f"{mark:7}  {c.skill}  {c.tool}: {c.kind} ({c.then} → {c.now}, by {c.why}): "
            f"{c.calls} call(s) in {len(c.runs)} run(s), e.g. {_args(c.example)}\n"
        )
    for skill, n in sorted(result.missing.items()):
        out(f"gone     {skill}: not in {folder}; its {n} call(s) were not replayed\n")
    widening = sum(c.calls for c in result.changes if c.widens)
    changed = sum(c.calls for c in result.changes)
    out(
        f"{result.calls} call(s) replayed: {changed} would change, "
        f"{widening} of them widening access\n"
    )


def _args(args: dict[str, object]) -> str:
    import json

    text = json.dumps(args, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= 120 else text[:119] + "…"


def register_policy(
    app: typer.Typer, group: typer.Typer, *, where: Callable[[], Where], open_db: OpenDb
) -> None:
    """Add `policy test` to `app`, in `group` (a Typer of the kind the app's groups are)."""

    @group.command("test")
    def test_command(
        skills_dir: Annotated[
            Path | None,
            typer.Argument(help="The proposed skills folder (default: the server's)"),
        ] = None,
        since: Annotated[
            str, typer.Option(help="The calls of this period: 30d, 12h, or an ISO date")
        ] = "30d",
    ) -> None:
        """Replay the period's tool calls through a proposed skills folder; print what would
        change, and exit 1 when a change widens access."""
        from pizzabot.agent.stats import period_start
        from pizzabot.store.backup import BackupError
        from pizzabot.store.chain import ChainError

        now = datetime.now(UTC)
        try:
            start = period_start(since, now=now)
        except ValueError as exc:
            _fail(f"--since {exc}", 2)
        place = where()
        folder = skills_dir or place.skills_dir
        if folder is None or not folder.is_dir():
            _fail(f"no skills folder at {folder}", 2)
        assert folder is not None
        try:
            result = asyncio.run(_replay(place, open_db, folder, start, now))
        except (ChainError, BackupError) as exc:
            _fail(str(exc), 1)
        _print(result, folder)
        if result.widens:
            raise typer.Exit(1)

    app.add_typer(group, name="policy")
