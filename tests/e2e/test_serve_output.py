"""What `pizzabot serve` itself prints, read from a real server process whose stderr is a file
(as under docker or systemd): one start block whose lines are never wrapped, one line when it
is ready with the skills and channels, one line when it stops, and no Alembic chatter."""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import stat
import subprocess
import sys
from pathlib import Path

from pizzabot.store.migrate import head_revision
from tests.peers.server import ServerProcess
from tests.waiting import eventually

ROOT = Path(__file__).resolve().parents[2]
GUARD = 60.0


def server_with_token_file(tmp_path: Path) -> ServerProcess:
    """A server whose token is made and kept in its data folder, under a path long enough
    that an 80-column wrap would break the `export` line."""
    skills = tmp_path / "skills"
    skills.mkdir()
    shutil.copy(ROOT / "manifests" / "skills" / "demo.yaml", skills)
    (skills / "broken.yaml").write_text("name: broken\ninstructions: hi\nmodle: pizzabot/demo\n")
    data = tmp_path / ("a-rather-long-folder-name-for-the-data-of-this-pizza-bot-" * 2) / "data"
    data.mkdir(parents=True, mode=0o700)  # it holds the server's log file
    server = ServerProcess(data_dir=data, skills_dir=skills)
    env = server.env()
    del env["PIZZABOT_API_TOKEN"]
    server.env = lambda: env  # type: ignore[method-assign]
    return server


async def wait_for_line(server: ServerProcess, start: str) -> None:
    await eventually(
        lambda: any(line.startswith(start) for line in server.log().splitlines()),
        what=f"a line starting {start!r}",
        timeout=GUARD,
        context=server.log,
    )


async def test_start_block_ready_line_and_stop_line(tmp_path: Path) -> None:
    server = server_with_token_file(tmp_path)
    await server.start()
    await wait_for_line(server, "ready: ")
    server.stop()  # SIGTERM
    data, base = server.data_dir, server.url
    lines = server.log().splitlines()
    assert lines[:6] == [
        f"Pizza Bot on {base}",
        f"  data:    {data} (SQLite)",
        f"  token:   kept in {data / 'api-token'} (new)",
        f"  inbox:   {base}/login (sign in with the token)",
        f"  CLI/API: export PIZZABOT_API_TOKEN=$(cat {shlex.quote(str(data / 'api-token'))})",
        f"  skills:  {server.skills_dir} (a changed file is loaded within 2 s; "
        "`pizzabot skills` shows what loaded)",
    ]
    assert len(lines[4]) > 80  # one line, however long
    [ready] = [line for line in lines if line.startswith("ready: ")]
    assert ready == (
        "ready: skills demo; refused broken.yaml (`pizzabot skills` says why); channels web, push; "
        f"worker on; database created (schema {head_revision()})"
    )
    assert lines[-1] == "Pizza Bot stopped (SIGTERM); its runs are kept and go on at the next start"
    assert not any("alembic" in line for line in lines)
    token = (data / "api-token").read_text().strip()
    assert token not in server.log()


async def test_ctrl_c_prints_one_stop_line_and_exits_130(tmp_path: Path) -> None:
    server = server_with_token_file(tmp_path)
    with open(server.log_path, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "pizzabot.bot.main", "serve", "--no-worker"],
            env=server.env(),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    server.proc = proc
    try:
        await wait_for_line(server, "ready: ")
        assert "ready: skills demo" in server.log() and "no worker (--no-worker)" in server.log()
        proc.send_signal(signal.SIGINT)
        assert proc.wait(GUARD) == 130
    finally:
        server.stop()
    lines = server.log().splitlines()
    assert lines[-1] == "Pizza Bot stopped (Ctrl-C); its runs are kept and go on at the next start"
    assert not any("Traceback" in line or "Aborted" in line for line in lines)


async def test_the_start_block_says_when_skills_load_only_on_request(tmp_path: Path) -> None:
    server = server_with_token_file(tmp_path)
    server.env()["PIZZABOT_SKILLS_WATCH"] = "0"  # the same dict every call
    await server.start()
    await wait_for_line(server, "ready: ")
    server.stop()
    assert (
        f"  skills:  {server.skills_dir} (changes load on `pizzabot skills --reload`; "
        "`pizzabot skills` shows what loaded)"
    ) in server.log().splitlines()


async def test_a_worker_makes_its_data_folder_private(tmp_path: Path) -> None:
    server = server_with_token_file(tmp_path)
    data = tmp_path / "worker-data"
    env = {**server.env(), "PIZZABOT_DATA_DIR": str(data)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "pizzabot.bot.main", "worker"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        await eventually((data / "pizzabot.db").exists, what="the worker's database", timeout=GUARD)
        assert stat.S_IMODE(data.stat().st_mode) == 0o700
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(GUARD)


async def test_the_database_is_summed_up_in_words_not_alembic_steps(tmp_path: Path) -> None:
    from alembic import command
    from alembic.script import ScriptDirectory
    from sqlalchemy import Connection

    from pizzabot.store.migrate import alembic_config, upgrade
    from pizzabot.store.sql import connect

    head = head_revision()
    previous = ScriptDirectory.from_config(alembic_config()).get_revision(head).down_revision
    assert isinstance(previous, str)
    engine = connect(f"sqlite+aiosqlite:///{tmp_path / 'old.db'}")
    try:

        def to_previous(conn: Connection) -> None:
            command.upgrade(alembic_config(conn), previous)

        async with engine.begin() as conn:
            await conn.run_sync(to_previous)
        assert await upgrade(engine) == f"upgraded from schema {previous} to {head}"
        assert await upgrade(engine) is None  # at the newest schema: nothing to say
    finally:
        await engine.dispose()


def test_an_agents_token_in_the_servers_variable_stops_the_start(tmp_path: Path) -> None:
    # Exported for an agent in the same shell, an ask token would become the owner's key.
    env = {**os.environ, "PIZZABOT_DATA_DIR": str(tmp_path / "data")}
    env["PIZZABOT_API_TOKEN"] = "pzb_" + "x" * 43
    done = subprocess.run(
        [sys.executable, "-m", "pizzabot.bot.main", "serve", "--port", "0"],
        env=env,
        capture_output=True,
        text=True,
        timeout=GUARD,
    )
    assert done.returncode == 2, done.stderr
    assert "holds a named token (pzb_…), not this server's own" in done.stderr
    assert "x" * 43 not in done.stderr + done.stdout  # the secret is not repeated back
