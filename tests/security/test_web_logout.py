"""Logging out of the web inbox ends the session on the server, against two real
`pizzabot serve` processes sharing one PostgreSQL database.

The session cookie is signed and stored nowhere, so it used to keep working for 30 days after
logout: a copy (another browser, a shared machine, a proxy's log) was as good as a login.
Logout now records the session as ended in the database, and every server refuses it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest_asyncio

from pizzabot.channels.web import SESSION_COOKIE
from tests.conftest import fresh_pg_database
from tests.peers.server import TOKEN, ServerProcess
from tests.peers.web import csrf_of


@pytest_asyncio.fixture
async def servers(tmp_path: Path) -> AsyncIterator[tuple[ServerProcess, ServerProcess]]:
    skills = tmp_path / "skills"
    skills.mkdir()
    async with fresh_pg_database() as url:
        env = {"PIZZABOT_DATABASE_URL": url}
        a = ServerProcess(data_dir=tmp_path / "a", skills_dir=skills, env=env, args=["--no-worker"])
        b = ServerProcess(data_dir=tmp_path / "b", skills_dir=skills, env=env, args=["--no-worker"])
        try:
            await a.start()
            await b.start()
            yield a, b
        finally:
            a.stop()
            b.stop()


async def test_a_cookie_copied_before_logout_is_refused_by_every_server_after_it(
    servers: tuple[ServerProcess, ServerProcess],
) -> None:
    a, b = servers
    async with httpx.AsyncClient(base_url=a.url, timeout=30) as browser:
        r = await browser.get("/login", params={"token": TOKEN})
        assert r.status_code == 303
        copied = browser.cookies[SESSION_COOKIE]
        home = await browser.get("/")
        assert home.status_code == 200
        csrf = csrf_of(home.text)
        # The copy works on both servers while the session lives.
        for server in (a, b):
            async with httpx.AsyncClient(base_url=server.url, timeout=30) as copy:
                copy.cookies.set(SESSION_COOKIE, copied)
                assert (await copy.get("/")).status_code == 200
        r = await browser.post("/logout", data={"csrf": csrf})
        assert r.status_code == 303 and r.headers["location"].startswith("/login")

    for server in (a, b):
        async with httpx.AsyncClient(base_url=server.url, timeout=30) as copy:
            copy.cookies.set(SESSION_COOKIE, copied)
            page = await copy.get("/")
            assert page.status_code == 303, server.url
            assert page.headers["location"].startswith("/login")
            assert (await copy.get("/boxes")).status_code == 401
            # Its CSRF token went with it: a form post starts nothing.
            r = await copy.post("/runs", data={"csrf": csrf, "skill": "x", "input": "go"})
            assert r.status_code == 401

    # Logging in again makes a new session that works.
    async with httpx.AsyncClient(base_url=b.url, timeout=30) as browser:
        assert (await browser.get("/login", params={"token": TOKEN})).status_code == 303
        assert browser.cookies[SESSION_COOKIE] != copied
        assert (await browser.get("/")).status_code == 200
