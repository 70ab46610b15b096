"""Failed web logins are throttled per client address.

Every wrong token used to be checked and audited, without limit (thousands of audit rows a
second from one client), and the address came from `X-Forwarded-For`, which anyone can set.
Now, after `PIZZABOT_WEB_LOGIN_MAX_FAILURES` (10) failures within `PIZZABOT_WEB_LOGIN_WINDOW`
seconds (300), the client's tries are refused with 429 and `Retry-After`, neither checked nor
audited; one audit row says it was throttled. The address is the connection's peer (a
forwarded one only from a configured proxy, and none is by default).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest_asyncio

from pizzabot.channels.web import SESSION_COOKIE
from tests.peers.server import TOKEN, ServerProcess
from tests.peers.web import WebApp


@pytest_asyncio.fixture
async def server(tmp_path: Path) -> AsyncIterator[ServerProcess]:
    skills = tmp_path / "skills"
    skills.mkdir()
    proc = ServerProcess(data_dir=tmp_path / "data", skills_dir=skills, args=["--no-worker"])
    try:
        await proc.start()
        yield proc
    finally:
        proc.stop()


async def audited(server: ServerProcess) -> list[dict[str, Any]]:
    async with server.client() as c:
        entries: list[dict[str, Any]] = (await c.get("/api/audit")).json()["items"]
    return [e for e in entries if str(e["action"]).startswith("web_login")]


async def test_a_guessing_client_is_told_to_wait_and_fills_no_audit_log(
    server: ServerProcess,
) -> None:
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as c:
        answers = []
        for n in range(40):
            # A new forwarded address on every try: it is not who the client is.
            forged = {"X-Forwarded-For": f"203.0.113.{n}"}
            if n % 2:
                answers.append(await c.post("/login", data={"token": f"guess-{n}"}, headers=forged))
            else:
                answers.append(
                    await c.get("/login", params={"token": f"guess-{n}"}, headers=forged)
                )
        assert [a.status_code for a in answers] == [401] * 10 + [429] * 30
        wait = int(answers[-1].headers["retry-after"])
        assert 0 < wait <= 300
        assert "Too many failed logins" in answers[-1].text
        # The right token waits too: while throttled nothing is checked.
        r = await c.get("/login", params={"token": TOKEN})
        assert r.status_code == 429 and SESSION_COOKIE not in c.cookies

    rows = await audited(server)
    assert sorted(e["action"] for e in rows) == ["web_login_failed"] * 10 + ["web_login_throttled"]
    throttled = next(e for e in rows if e["action"] == "web_login_throttled")
    assert throttled["detail"]["client"] == "127.0.0.1"
    assert {e["detail"]["client"] for e in rows} == {"127.0.0.1"}


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


async def test_the_wait_ends_with_the_window_and_a_login_clears_the_count(
    tmp_path: Path,
) -> None:
    clock = Clock()
    async with WebApp(tmp_path, clock=clock, login_max_failures=3, login_window=600) as web:
        async with web.client() as c:
            for _ in range(3):
                assert (await c.post("/login", data={"token": "wrong"})).status_code == 401
            r = await c.post("/login", data={"token": web.token})
            assert r.status_code == 429 and r.headers["retry-after"] == "600"
            clock.now += 599
            r = await c.post("/login", data={"token": web.token})
            assert r.status_code == 429 and r.headers["retry-after"] == "1"
            clock.now += 1
            # The window is over: tries are checked again, and the right token logs in.
            assert (await c.post("/login", data={"token": "wrong"})).status_code == 401
            assert (await c.post("/login", data={"token": web.token})).status_code == 303
            # A login forgets the failures before it: three more are allowed.
            for _ in range(3):
                assert (await c.post("/login", data={"token": "wrong"})).status_code == 401
            assert (await c.post("/login", data={"token": "wrong"})).status_code == 429
        actions = [e.action for e in await web.store.audit_log()]
        assert actions.count("web_login_throttled") == 2
        assert actions.count("web_login_failed") == 7
