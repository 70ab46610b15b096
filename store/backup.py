"""Backups of a whole server, and restoring one into an empty data folder.

A backup is a folder: the database (SQLite through its online backup API, which copies a
consistent snapshot while the server goes on writing; PostgreSQL through `pg_dump`, which
reads one snapshot too), a copy of every other file of the data folder (the API token, the
mail key, the audit key: a restored server is the same server), and `backup.json` saying
what it holds. Restoring refuses a data folder that is not empty, and a PostgreSQL database
that already has tables: it never overwrites anything.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from sqlalchemy.engine import make_url

_DB_FILE = "pizzabot.db"
_DUMP_FILE = "pizzabot.dump"
_MANIFEST = "backup.json"
_FILES = "files"
_FORMAT = 1


class BackupError(Exception):
    """A backup or a restore that cannot go ahead; nothing was overwritten."""


@dataclass(frozen=True)
class Where:
    """Where a server keeps its state: the database, the data folder, the audit key; and
    where its audit rows go over OTLP, when that is configured."""

    database_url: str
    data_dir: Path
    audit_key: Path
    otlp_logs: str | None = None


def sqlite_path(url: str) -> Path | None:
    parsed = make_url(url)
    if not parsed.get_backend_name().startswith("sqlite"):
        return None
    if not parsed.database or parsed.database == ":memory:":
        raise BackupError("an in-memory SQLite database has nothing to back up")
    return Path(parsed.database)


def _libpq(url: str) -> tuple[str, dict[str, str]]:
    """`url` as pg_dump reads it, and its password as an environment variable (never an
    argument, which other users can read in the process list)."""
    parsed = make_url(url)
    env = dict(os.environ)
    if parsed.password is not None:
        env["PGPASSWORD"] = str(parsed.password)
    plain = parsed.set(drivername="postgresql", password=None)
    return plain.render_as_string(hide_password=False), env


def _pg_tool(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        raise BackupError(
            f"{name} is not installed: a PostgreSQL database is backed up and restored with "
            f"PostgreSQL's own {name} (Debian: apt-get install postgresql-client)"
        )
    return found


def _empty_target(path: Path, what: str) -> None:
    if path.exists() and (not path.is_dir() or any(path.iterdir())):
        raise BackupError(f"{what} {path} is not an empty folder: refusing to overwrite it")


def _database_files(where: Where) -> set[str]:
    db = sqlite_path(where.database_url)
    if db is None or db.parent.resolve() != where.data_dir.resolve():
        return set()
    return {db.name, f"{db.name}-wal", f"{db.name}-shm", f"{db.name}-journal"}


def backup(where: Where, target: Path, *, now: datetime) -> dict[str, object]:
    """Back the server up into `target` (a new or empty folder); what `backup.json` says."""
    _empty_target(target, "the backup folder")
    db = sqlite_path(where.database_url)
    if db is not None and not db.exists():
        raise BackupError(f"there is no database at {db}")
    dump = _pg_tool("pg_dump") if db is None else ""
    target.mkdir(mode=0o700, parents=True, exist_ok=True)
    if db is not None:
        _sqlite_backup(db, target / _DB_FILE)
        kind = "sqlite"
    else:
        url, env = _libpq(where.database_url)
        out = target / _DUMP_FILE
        _run([dump, "--format=custom", f"--file={out}", url], env)
        kind = "postgresql"
    files = target / _FILES
    files.mkdir(mode=0o700)
    skip = _database_files(where)
    copied = []
    for path in sorted(where.data_dir.iterdir()) if where.data_dir.is_dir() else []:
        if path.is_file() and path.name not in skip:
            shutil.copy2(path, files / path.name)
            copied.append(path.name)
    if where.audit_key.is_file() and where.audit_key.parent.resolve() != where.data_dir.resolve():
        shutil.copy2(where.audit_key, target / "audit-key")
    manifest: dict[str, object] = {
        "format": _FORMAT,
        "database": kind,
        "taken_at": now.isoformat(),
        "files": copied,
    }
    (target / _MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return manifest


def _sqlite_backup(source: Path, dest: Path) -> None:
    """SQLite's online backup: a consistent copy while others write (WAL readers never block
    writers). Written beside its place first, so a failed copy leaves no half a database."""
    part = dest.with_name(dest.name + ".part")
    src = sqlite3.connect(f"file:{source}?mode=ro", uri=True, timeout=30)
    try:
        fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.close(fd)
        dst = sqlite3.connect(part)
        try:
            src.backup(dst)
        finally:
            dst.close()
    finally:
        src.close()
    part.rename(dest)


def _run(cmd: list[str], env: dict[str, str]) -> None:
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise BackupError(f"{Path(cmd[0]).name} failed: {done.stderr.strip()[-2000:]}")


def _read_manifest(source: Path) -> dict[str, object]:
    try:
        manifest = json.loads((source / _MANIFEST).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise BackupError(f"{source} is not a Pizza Bot backup (no {_MANIFEST})") from None
    except (OSError, ValueError) as exc:
        raise BackupError(f"cannot read {source / _MANIFEST}: {exc}") from None
    if not isinstance(manifest, dict) or manifest.get("format") != _FORMAT:
        raise BackupError(f"{source} is a backup of a format this version does not know")
    return manifest


def restore(where: Where, source: Path) -> dict[str, object]:
    """Restore the backup in `source` into `where`, whose data folder must be empty."""
    manifest = _read_manifest(source)
    _empty_target(where.data_dir, "the data folder")
    db = sqlite_path(where.database_url)
    if (db is None) != (manifest["database"] == "postgresql"):
        raise BackupError(
            f"the backup holds a {manifest['database']} database, the server is set up for "
            f"{'SQLite' if db is not None else 'PostgreSQL'}"
        )
    if db is not None and db.exists():
        raise BackupError(f"there is a database at {db} already: refusing to overwrite it")
    if db is None:
        _pg_restore(where.database_url, source / _DUMP_FILE)
    where.data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    for path in sorted((source / _FILES).iterdir()):
        shutil.copy2(path, where.data_dir / path.name)
    if (source / "audit-key").is_file() and not where.audit_key.exists():
        shutil.copy2(source / "audit-key", where.audit_key)
    if db is not None:
        db.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        shutil.copy2(source / _DB_FILE, db)
        db.chmod(0o600)
    return manifest


def _pg_restore(url: str, dump: Path) -> None:
    plain, env = _libpq(url)
    tool = _pg_tool("pg_restore")
    psql = _pg_tool("psql")
    count = subprocess.run(
        [
            psql,
            "-XAtq",
            "-d",
            plain,
            "-c",
            "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'",
        ],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if count.returncode != 0:
        raise BackupError(f"cannot reach the database: {count.stderr.strip()[-2000:]}")
    if count.stdout.strip() != "0":
        raise BackupError("the database is not empty: restore into a new, empty database")
    # One transaction: a restore that fails leaves the database as empty as it found it.
    _run([tool, "--no-owner", "--single-transaction", f"--dbname={plain}", str(dump)], env)
