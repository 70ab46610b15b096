"""The audit chain and backups over a served bot: runs, decisions and grants made through the
API, then `pizzabot audit verify`, `audit export`, `backup` and `restore` as a person types
them on the server's host."""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import fresh_pg_database
from tests.peers.grant_stories import calls, calls_from_input
from tests.peers.otlp import collector
from tests.peers.stack import Stack
from tests.waiting import eventually


def host(
    data: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """A server-side command, with the server's data folder."""
    return subprocess.run(
        [sys.executable, "-m", "pizzabot.bot.main", *args],
        env={**os.environ, "PIZZABOT_DATA_DIR": str(data), **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
    )


def rows(db: Path, table: str, column: str = "id") -> set[str]:
    with sqlite3.connect(db) as c:
        return {str(r[0]) for r in c.execute(f"SELECT {column} FROM {table}")}


async def make_history(st: Stack) -> list[str]:
    """A run decided with a grant, one rejected, one approved: runs, items, grants, audit."""
    run_ids = []
    for decision, grant in (("approve", "1h"), ("reject", None), ("approve", None)):
        run = await st.start_run("test", calls(("a@x.example", f"s-{decision}-{grant}")))
        run_ids.append(run["id"])
        item = await st.wait_item(run["id"], status="pending")
        async with st.client() as c:
            body: dict[str, object] = {"decision": decision}
            if grant:
                body["grant"] = grant
            if decision == "reject":
                body["reason"] = "not today"
            r = await c.post(f"/api/items/{item['id']}/decision", json=body)
            assert r.status_code == 200, r.text
        await st.wait_run(run["id"], {"done"})
        if grant:  # the grant holds: the next runs' calls would not ask; revoke it
            async with st.client() as c:
                (g,) = (await c.get("/api/grants")).json()["items"]
                assert (await c.delete(f"/api/grants/{g['id']}")).status_code in {200, 204}
    return run_ids


async def sends_the_same_rows_over_otlp(data: Path, lines: list[dict[str, Any]]) -> None:
    """`audit export --otlp` hands a collector what the JSON export prints, chain and all;
    a collector that refuses them, or none configured, is said in one line."""
    with collector() as otlp:
        sent = await asyncio.to_thread(
            host, data, "audit", "export", "--otlp", env={"OTEL_EXPORTER_OTLP_ENDPOINT": otlp.url}
        )
    assert sent.returncode == 0, sent.stderr
    assert sent.stdout == f"sent {len(lines)} audit rows to {otlp.url}/v1/logs\n"
    got = [r["attributes"] for r in otlp.records]
    assert [(a["pizzabot.audit.seq"], a["pizzabot.audit.hash"]) for a in got] == [
        (x["seq"], x["hash"]) for x in lines
    ]
    assert [json.loads(a["pizzabot.audit.detail"]) for a in got] == [x["detail"] for x in lines]
    first = otlp.records[0]
    assert first["event_name"] == "pizzabot.audit" and first["resource"]["service.name"] == (
        "pizzabot"
    )
    with collector(refuse=True) as refusing:
        env = {"OTEL_EXPORTER_OTLP_LOGS_ENDPOINT": f"{refusing.url}/v1/logs"}
        refused = await asyncio.to_thread(host, data, "audit", "export", "--otlp", env=env)
    assert refused.returncode == 1 and refused.stdout == ""
    assert refused.stderr == (
        f"error: the OTLP collector at {refusing.url}/v1/logs did not take the audit rows from "
        f"seq {lines[0]['seq']} on (0 were sent before it refused them or could not be reached)\n"
    )
    unset = {"OTEL_EXPORTER_OTLP_ENDPOINT": "", "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT": ""}
    nowhere = await asyncio.to_thread(host, data, "audit", "export", "--otlp", env=unset)
    assert nowhere.returncode == 2 and "set OTEL_EXPORTER_OTLP_ENDPOINT" in nowhere.stderr


async def test_verify_passes_after_a_served_bot_worked_and_names_an_edited_row(
    tmp_path: Path,
) -> None:
    env = {"PIZZABOT_AUDIT_CHECKPOINT_EVERY": "0.2"}
    async with Stack(tmp_path, script=calls_from_input, env=env) as st:
        await make_history(st)
        data = st.server.data_dir
        key = data / "audit-key"
        assert stat.S_IMODE(key.stat().st_mode) == 0o600  # made at the first start
        db = data / "pizzabot.db"
        await eventually(
            lambda: (
                rows(db, "audit_checkpoints", "seq")
                and max(int(s) for s in rows(db, "audit_checkpoints", "seq"))
                == max(int(s) for s in rows(db, "audit", "seq"))
            ),
            what="a checkpoint of the newest row",
        )
        ok = await asyncio.to_thread(host, data, "audit", "verify")
        assert ok.returncode == 0, ok.stderr
        assert (
            "audit chain holds" in ok.stdout
            and key.read_text().strip() not in ok.stdout + ok.stderr
        )
        exported = await asyncio.to_thread(host, data, "audit", "export")
        lines = [json.loads(x) for x in exported.stdout.splitlines()]
        actions = {x["action"] for x in lines}
        assert {"decision"} <= actions and any("grant" in a for a in actions), actions
        bad = await asyncio.to_thread(host, data, "audit", "export", "--since", "yesterday")
        assert bad.returncode == 2 and "--since 'yesterday'" in bad.stderr
        await sends_the_same_rows_over_otlp(data, lines)

        target = lines[len(lines) // 2]
        with sqlite3.connect(db) as c:
            c.execute("UPDATE audit SET channel = 'slack' WHERE id = ?", (target["id"],))
        failed = await asyncio.to_thread(host, data, "audit", "verify")
        assert failed.returncode == 1
        assert failed.stderr.startswith(f"error: audit row {target['id']} "), failed.stderr
        assert "edited" in failed.stderr


async def test_a_backup_taken_while_runs_go_on_restores_and_verifies(tmp_path: Path) -> None:
    async with Stack(tmp_path, script=calls_from_input) as st:
        known = await make_history(st)
        data = st.server.data_dir
        db = data / "pizzabot.db"
        before = {t: rows(db, t) for t in ("runs", "items", "grants", "audit")}
        # Runs go on while the backup is taken: each waits for a decision, some decided.
        more = [await st.start_run("test", calls(("b@x.example", f"m{k}"))) for k in range(4)]

        async def decide_some() -> None:
            for run in more[:2]:
                item = await st.wait_item(run["id"], status="pending")
                await st.decide(item["id"], "approve")

        deciding = asyncio.create_task(decide_some())
        backup = tmp_path / "backup"
        done = await asyncio.to_thread(host, data, "backup", str(backup))
        await deciding
        assert done.returncode == 0, done.stderr
        refused = await asyncio.to_thread(host, data, "backup", str(backup))
        assert refused.returncode == 1 and "not an empty folder" in refused.stderr

    fresh = tmp_path / "fresh"
    restored = await asyncio.to_thread(host, fresh, "restore", str(backup))
    assert restored.returncode == 0, restored.stderr
    again = await asyncio.to_thread(host, fresh, "restore", str(backup))
    assert again.returncode == 1 and "not an empty folder" in again.stderr
    copy = fresh / "pizzabot.db"
    for table, ids in before.items():
        assert ids <= rows(copy, table), table
    assert set(known) <= rows(copy, "runs")
    assert (fresh / "audit-key").read_bytes() == (data / "audit-key").read_bytes()
    verified = await asyncio.to_thread(host, fresh, "audit", "verify")
    assert verified.returncode == 0, verified.stderr


async def test_restore_refuses_what_is_not_a_backup(tmp_path: Path) -> None:
    (tmp_path / "junk").mkdir()
    done = await asyncio.to_thread(host, tmp_path / "data", "restore", str(tmp_path / "junk"))
    assert done.returncode == 1 and "is not a Pizza Bot backup" in done.stderr
    assert not (tmp_path / "data").exists()
    (tmp_path / "data").mkdir()
    for args in (("audit", "verify"), ("audit", "export")):
        missing = await asyncio.to_thread(host, tmp_path / "data", *args)
        assert missing.returncode == 1 and "there is no database at" in missing.stderr
    assert list((tmp_path / "data").iterdir()) == []  # nothing made on the way


@pytest.mark.postgres
async def test_a_postgres_backup_restores_into_an_empty_database(tmp_path: Path) -> None:
    async with fresh_pg_database() as url, fresh_pg_database() as empty:
        env = {"PIZZABOT_DATABASE_URL": url}
        async with Stack(tmp_path, script=calls_from_input, env=env) as st:
            known = await make_history(st)
            data = st.server.data_dir
            running = await st.start_run("test", calls(("b@x.example", "later")))
            done = await asyncio.to_thread(host, data, "backup", str(tmp_path / "b"), env=env)
            assert done.returncode == 0, done.stderr
            await st.wait_item(running["id"], status="pending")
        into_used = await asyncio.to_thread(
            host, tmp_path / "other", "restore", str(tmp_path / "b"), env=env
        )
        assert into_used.returncode == 1 and "not empty" in into_used.stderr
        fresh_env = {"PIZZABOT_DATABASE_URL": empty}
        fresh = tmp_path / "fresh"
        restored = await asyncio.to_thread(
            host, fresh, "restore", str(tmp_path / "b"), env=fresh_env
        )
        assert restored.returncode == 0, restored.stderr
        verified = await asyncio.to_thread(host, fresh, "audit", "verify", env=fresh_env)
        assert verified.returncode == 0, verified.stderr
        exported = await asyncio.to_thread(host, fresh, "audit", "export", env=fresh_env)
        runs = {json.loads(x)["run_id"] for x in exported.stdout.splitlines()}
        assert set(known) <= runs


async def test_a_postgres_backup_without_pg_dump_says_what_is_missing(tmp_path: Path) -> None:
    env = {
        "PIZZABOT_DATABASE_URL": "postgresql+asyncpg://u:secret@127.0.0.1:9/none",
        "PATH": "/nonexistent",
    }
    done = await asyncio.to_thread(host, tmp_path / "data", "backup", str(tmp_path / "b"), env=env)
    assert done.returncode == 1
    assert "pg_dump is not installed" in done.stderr and "secret" not in done.stderr
    assert not (tmp_path / "b").exists()
