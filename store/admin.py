"""The commands that work on the database itself, not through the API: `pizzabot audit verify`,
`pizzabot audit export`, `pizzabot backup` and `pizzabot restore`.

They run on the server's host with the server's settings, which `pizzabot.bot.main` reads
and hands over as a `Where`; every failure is one `error: …` line and a non-zero exit
(1: the check failed or the work could not be done; 2: bad input).
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

# The client commands share this process: what reads the database is imported when used.
if TYPE_CHECKING:
    from pizzabot.store.backup import Where
    from pizzabot.store.chain_verify import Verdict
    from pizzabot.store.database import Database

__all__ = ["register"]

_AGO = re.compile(r"^(\d+)([smhdw])$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def _fail(message: str, code: int = 1) -> None:
    sys.stderr.write(f"error: {message}\n")
    raise typer.Exit(code)


def parse_since(text: str, *, now: datetime) -> datetime:
    """`30d`, `12h`, … ago, or an ISO date or time (UTC unless it says otherwise)."""
    if m := _AGO.match(text.strip()):
        return now - timedelta(**{_UNITS[m.group(2)]: int(m.group(1))})
    try:
        at = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(
            f"--since {text!r} is neither a duration (30d, 12h, 45m) nor an ISO date or time"
        ) from None
    return at if at.tzinfo is not None else at.replace(tzinfo=UTC)


async def _open(where: Where) -> Database:
    from pizzabot.store.backup import sqlite_path
    from pizzabot.store.chain import ChainError
    from pizzabot.store.database import Database, connect
    from pizzabot.store.migrate import current_revision, head_revision

    file = sqlite_path(where.database_url)
    if file is not None and not file.exists():  # connecting would make an empty one
        raise ChainError(f"there is no database at {file}")
    db = Database(connect(where.database_url))
    now_at, head = await current_revision(db.engine), head_revision()
    if now_at != head:
        await db.aclose()
        found = "no Pizza Bot schema" if now_at is None else f"schema {now_at}"
        raise ChainError(
            f"the database has {found}, not {head}: start `pizzabot serve` once to upgrade it"
        )
    return db


async def _verify(where: Where) -> Verdict:
    from pizzabot.store.chain import read_key
    from pizzabot.store.chain_verify import verify

    key = read_key(where.audit_key) if where.audit_key.exists() else None
    db = await _open(where)
    try:
        verdict = await verify(db, key=key)
    finally:
        await db.aclose()
    if key is None and verdict.checkpoints:
        verdict.bad_checkpoints.append(
            f"{verdict.checkpoints} checkpoint(s) could not be checked: no audit key at "
            f"{where.audit_key}"
        )
    return verdict


async def _export(where: Where, since: datetime | None, *, otlp: bool = False) -> int:
    from pizzabot.store.chain_verify import export

    if otlp and where.otlp_logs is None:
        raise ValueError(
            "--otlp needs a collector: set OTEL_EXPORTER_OTLP_ENDPOINT "
            "(or OTEL_EXPORTER_OTLP_LOGS_ENDPOINT)"
        )
    db = await _open(where)
    n = 0
    try:
        if otlp and where.otlp_logs is not None:
            from pizzabot.store.audit_otlp import send

            return await send(export(db, since=since), endpoint=where.otlp_logs)
        async for entry in export(db, since=since):
            sys.stdout.write(json.dumps(entry, ensure_ascii=False, sort_keys=True) + "\n")
            n += 1
    finally:
        await db.aclose()
    return n


def register(app: typer.Typer, audit: typer.Typer, *, where: Callable[[], Where]) -> None:
    """Add the commands to `app` (backup, restore) and to its `audit` group."""

    @audit.command("verify")
    def verify_command() -> None:
        """Check the audit chain and its signed checkpoints; name the first bad row."""
        from pizzabot.store.backup import BackupError
        from pizzabot.store.chain import ChainError

        try:
            verdict = asyncio.run(_verify(where()))
        except (ChainError, BackupError) as exc:
            _fail(str(exc))
        for line in ([verdict.first_bad] if verdict.first_bad else []) + verdict.bad_checkpoints:
            sys.stderr.write(f"error: {line}\n")
        if not verdict.ok:
            raise typer.Exit(1)
        sys.stdout.write(
            f"audit chain holds: {verdict.rows} rows, {verdict.checkpoints} signed checkpoints\n"
        )

    @audit.command("export")
    def export_command(
        since: Annotated[
            str | None, typer.Option(help="Only rows from then on: 30d, 12h, or an ISO date")
        ] = None,
        otlp: Annotated[
            bool, typer.Option("--otlp", help="Send them to the OTLP collector as log records")
        ] = False,
    ) -> None:
        """Print the audit rows as JSON Lines, oldest first, with their chain hashes (or
        send them as OpenTelemetry log records with `--otlp`)."""
        from pizzabot.store.audit_otlp import OtlpExportError
        from pizzabot.store.backup import BackupError
        from pizzabot.store.chain import ChainError

        try:
            start = parse_since(since, now=datetime.now(UTC)) if since else None
        except ValueError as exc:
            _fail(str(exc), 2)
        at = where()
        try:
            n = asyncio.run(_export(at, start, otlp=otlp))
        except ValueError as exc:
            _fail(str(exc), 2)
        except (ChainError, BackupError, OtlpExportError) as exc:
            _fail(str(exc))
        if otlp:
            sys.stdout.write(f"sent {n} audit rows to {at.otlp_logs}\n")

    _register_backup(app, where)


def _register_backup(app: typer.Typer, where: Callable[[], Where]) -> None:
    @app.command("backup")
    def backup_command(
        path: Annotated[Path, typer.Argument(help="A new (or empty) folder for the backup")],
    ) -> None:
        """Back up the database and the data folder's keys while the server runs."""
        from pizzabot.store.backup import BackupError, backup

        try:
            manifest = backup(where(), path, now=datetime.now(UTC))
        except BackupError as exc:
            _fail(str(exc))
        sys.stdout.write(f"backed up the {manifest['database']} database to {path}\n")

    @app.command("restore")
    def restore_command(
        path: Annotated[Path, typer.Argument(help="A folder made by `pizzabot backup`")],
    ) -> None:
        """Restore a backup into an empty data folder (and, on PostgreSQL, an empty database)."""
        from pizzabot.store.backup import BackupError, restore

        try:
            manifest: dict[str, Any] = restore(where(), path)
        except BackupError as exc:
            _fail(str(exc))
        sys.stdout.write(
            f"restored the {manifest['database']} database taken at {manifest['taken_at']}\n"
        )
