"""An upgrade from the previous release's database: a SQLite database written by a served
bot of the previous schema (runs done and waiting, decisions, a grant given and revoked, a
token, the audit chain and a signed checkpoint; `tests/fixtures/upgrade/`) is brought to
this release's schema by `pizzabot serve`, and everything in it is there and works: the
runs, the waiting card (which can still be decided), the audit chain (`audit verify`)."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

from pizzabot.store.migrate import head_revision
from tests.peers.server import ServerProcess

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "upgrade"
SKILLS = Path(__file__).resolve().parents[2] / "manifests" / "skills"
#: What the previous release's database holds (ids as written in the fixture).
DONE = {"0e479d30fd2b4e30", "a999bcae5355472b", "320c960368814f95"}
WAITING, WAITING_ITEM = "563d04e2c8eb4e65", "83ad1c6cbe6b4e0f"


def previous_release(data: Path) -> None:
    data.mkdir(mode=0o700)
    (data / "pizzabot.db").touch(mode=0o600)
    with sqlite3.connect(data / "pizzabot.db") as c:
        c.executescript((FIXTURE / "schema-0012.sql").read_text())
    key = data / "audit-key"
    shutil.copy(FIXTURE / "audit-key", key)
    key.chmod(0o600)


def verify(data: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pizzabot.bot.main", "audit", "verify"],
        env={**os.environ, "PIZZABOT_DATA_DIR": str(data)},
        capture_output=True,
        text=True,
        timeout=120,
    )


async def test_serve_upgrades_the_previous_releases_database_and_loses_nothing(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    previous_release(data)
    with sqlite3.connect(data / "pizzabot.db") as c:
        rows_before = c.execute("SELECT count(*) FROM audit").fetchone()[0]
    server = ServerProcess(data_dir=data, skills_dir=SKILLS, args=["--no-worker"])
    await server.start()
    try:
        ready = re.search(r"^ready: .*$", server.log(), re.M)
        assert ready is not None, server.log()
        if head_revision() != "0012":  # the ready line says what the start did to the schema
            assert f"upgraded from schema 0012 to {head_revision()}" in ready.group(0)
        assert "mode 644" not in server.log()
        async with server.client() as c:
            runs = {r["id"]: r for r in (await c.get("/api/runs")).json()["items"]}
            assert set(runs) >= DONE and {runs[i]["status"] for i in DONE} == {"done"}
            assert runs[WAITING]["status"] == "waiting"
            action = (await c.get("/api/inbox", params={"box": "action"})).json()["items"]
            assert [i["id"] for i in action] == [WAITING_ITEM]
            grants = (await c.get("/api/grants", params={"all": "true"})).json()["items"]
            assert len(grants) == 1 and grants[0]["revoked_at"] is not None
            tokens = (await c.get("/api/tokens")).json()["items"]
            assert [(t["name"], t["scope"]) for t in tokens] == [("old-agent", "ask")]
            r = await c.post(f"/api/items/{WAITING_ITEM}/decision", json={"decision": "reject"})
            assert r.status_code == 200, r.text
            audit = (await c.get("/api/audit")).json()["items"]
            assert len(audit) > rows_before  # the decision, chained after the old rows
    finally:
        server.stop()
    held = await asyncio.to_thread(verify, data)
    assert held.returncode == 0, held.stderr
    assert held.stdout.startswith("audit chain holds: ")
