"""The data folder and the database are private to the user who runs Pizza Bot.

The database holds item secrets (reply tokens, arguments) and the folder the API token and
the mail key, so both must be closed to other local users: a real `pizzabot serve` makes
them 0700 / 0600 (SQLite's -wal and -shm files too), and tightens ones an older start left
open, saying so in its log.
"""

from __future__ import annotations

import os
from pathlib import Path

from tests.peers.server import ServerProcess


def _mode(path: Path) -> int:
    return path.stat().st_mode & 0o777


def _database_files(data: Path) -> list[Path]:
    return [data / name for name in ("pizzabot.db", "pizzabot.db-wal", "pizzabot.db-shm")]


async def test_a_fresh_data_folder_and_database_are_closed_to_other_users(tmp_path: Path) -> None:
    data = tmp_path / "fresh" / "data"
    server = ServerProcess(
        data_dir=tmp_path / "logs",
        skills_dir=tmp_path / "skills",
        env={"PIZZABOT_DATA_DIR": str(data)},
    )
    old_umask = os.umask(0o022)  # the usual umask, which alone would give 0755 / 0644
    try:
        await server.start(timeout=120)
    finally:
        os.umask(old_umask)
    try:
        # A running server in WAL mode has all three database files open.
        assert [p.name for p in _database_files(data) if p.exists()] == [
            "pizzabot.db",
            "pizzabot.db-wal",
            "pizzabot.db-shm",
        ]
        assert _mode(data) == 0o700
        assert {p.name: _mode(p) for p in _database_files(data)} == {
            "pizzabot.db": 0o600,
            "pizzabot.db-wal": 0o600,
            "pizzabot.db-shm": 0o600,
        }
    finally:
        server.stop()


async def test_an_open_data_folder_and_database_are_tightened_and_logged(tmp_path: Path) -> None:
    data = tmp_path / "data"
    server = ServerProcess(data_dir=data, skills_dir=tmp_path / "skills")
    await server.start(timeout=120)
    server.kill()  # as a crash would: the -wal and -shm files stay behind
    data.chmod(0o755)
    for path in _database_files(data):
        if path.exists():
            path.chmod(0o644)
    assert _mode(data / "pizzabot.db") == 0o644

    await server.start(timeout=120)
    try:
        assert _mode(data) == 0o700
        modes = {p.name: _mode(p) for p in _database_files(data) if p.exists()}
        assert modes and set(modes.values()) == {0o600}
        log = server.log()
        assert f"data folder {data} was open to other users (mode 755); made it 700" in log
        assert f"database file {data / 'pizzabot.db'} was open to other users (mode 644)" in log
    finally:
        server.stop()
