"""The start banner shows the API token only to a person at a terminal: when stderr goes to a
file, a pipe, `docker logs` or the journal, it names where the token is kept instead."""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import sys
from pathlib import Path

from tests.peers.server import TOKEN, ServerProcess
from tests.waiting import eventually

GUARD = 60.0


async def test_a_logged_banner_names_the_token_file_not_the_token(tmp_path: Path) -> None:
    server = ServerProcess(data_dir=tmp_path / "data", skills_dir=tmp_path, args=["--no-worker"])
    env = server.env()
    del env["PIZZABOT_API_TOKEN"]  # the token is made and kept in the data folder
    server.extra_env = {}
    server.data_dir.mkdir()
    server.env = lambda: env  # type: ignore[method-assign]
    await server.start()
    server.stop()
    token = (server.data_dir / "api-token").read_text().strip()
    logged = server.log()
    assert token not in logged
    assert "api-token" in logged and "/login" in logged


async def test_a_terminal_gets_the_login_link(tmp_path: Path) -> None:
    server = ServerProcess(data_dir=tmp_path / "data", skills_dir=tmp_path, args=["--no-worker"])
    server.data_dir.mkdir()
    main, child = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "pizzabot.bot.main", "serve", "--no-worker"],
        env={**server.env(), "COLUMNS": "200"},
        stdout=subprocess.DEVNULL,
        stderr=child,
        start_new_session=True,
    )
    os.close(child)
    seen = b""

    def link_shown() -> bool:
        nonlocal seen
        if select.select([main], [], [], 0)[0]:
            seen += os.read(main, 4096)
            seen = re.sub(rb"\x1b\[[0-9;]*m", b"", seen)  # rich's colours
        return f"login?token={TOKEN}".encode() in seen

    try:
        await eventually(
            link_shown,
            what="the login link on the terminal",
            timeout=GUARD,
            context=lambda: seen.decode(errors="replace"),
        )
    finally:
        server.proc = proc
        server.stop()
        os.close(main)
    assert f"/login?token={TOKEN}".encode() in seen
