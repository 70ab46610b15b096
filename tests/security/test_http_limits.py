"""Bodies are refused before they are read: a body over the limit gets 413 as soon as its
declared length (or, streamed, its size) says so; `/api/*` without the token gets 401 before
the body is parsed; `/slack/events` checks the signature over the limited body before Bolt
parses it. List routes bound their numbers. Against a real `pizzabot serve` process."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from tests.peers.raw_http import exchange
from tests.peers.server import TOKEN, ServerProcess
from tests.peers.slack_api import SlackApi, signed_headers

SECRET = "slack-signing-secret-for-tests"
MiB = 1024 * 1024


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def server(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[ServerProcess]:
    root: Path = tmp_path_factory.mktemp("http-limits")
    async with SlackApi() as slack:
        proc = ServerProcess(
            data_dir=root / "data",
            skills_dir=root,
            args=["--no-worker"],
            env={
                "PIZZABOT_SLACK_MODE": "http",
                "PIZZABOT_SLACK_BOT_TOKEN": "xoxb-test",
                "PIZZABOT_SLACK_SIGNING_SECRET": SECRET,
                "PIZZABOT_SLACK_API_URL": slack.url,
            },
        )
        await proc.start()
        try:
            yield proc
        finally:
            proc.stop()


async def chunked_past_limit(port: int, head: str) -> int | None:
    """Send a chunked body with no declared length, past the 1 MiB limit and never finished,
    then stop sending and read the answer: its status, or None when the connection was reset.
    The server closes with our extra bytes unread, so the kernel may reset the connection
    before its answer is read; a reset is the server refusing too."""
    chunk = b"a=" + b"x" * (64 * 1024 - 2)
    body = b"".join(b"%x\r\n%s\r\n" % (len(chunk), chunk) for _ in range(18))  # 1.125 MiB
    try:
        status, _ = await exchange(port, head + "Transfer-Encoding: chunked\n", body)
    except ConnectionResetError:
        return None
    return status


pytestmark = pytest.mark.asyncio(loop_scope="module")


async def test_a_96_mb_unsigned_slack_post_is_refused_unread(server: ServerProcess) -> None:
    status, raw = await exchange(
        server.port,
        "POST /slack/events HTTP/1.1\nHost: x\n"
        "Content-Type: application/x-www-form-urlencoded\n"
        f"Content-Length: {96 * MiB}\n",
        b"payload=",
    )
    assert status == 413
    assert b"larger than 1048576 bytes" in raw
    async with server.client(token=None) as c:
        assert (await c.get("/healthz")).json()["ok"] is True


async def test_a_streamed_slack_body_over_the_limit_is_cut_off(server: ServerProcess) -> None:
    status = await chunked_past_limit(
        server.port,
        "POST /slack/events HTTP/1.1\nHost: x\nContent-Type: application/x-www-form-urlencoded\n",
    )
    assert status in (413, None)
    async with server.client(token=None) as c:
        assert (await c.get("/healthz")).json()["ok"] is True


async def test_slack_signature_is_checked_before_the_body_reaches_bolt(
    server: ServerProcess,
) -> None:
    body = json.dumps({"type": "url_verification", "challenge": "pizza-challenge"})
    async with server.client(token=None) as c:
        unsigned = await c.post(
            "/slack/events", content=body, headers={"Content-Type": "application/json"}
        )
        wrong = await c.post(
            "/slack/events",
            content=body,
            headers=signed_headers("not-the-secret", body, content_type="application/json"),
        )
        signed = await c.post(
            "/slack/events",
            content=body,
            headers=signed_headers(SECRET, body, content_type="application/json"),
        )
    assert unsigned.status_code == 401 and wrong.status_code == 401
    assert unsigned.json() == {"detail": "missing, stale or wrong Slack signature"}
    # The same bytes reach Bolt once the signature holds.
    assert signed.status_code == 200 and "pizza-challenge" in signed.text


async def test_a_large_api_body_without_a_token_gets_401_unread(server: ServerProcess) -> None:
    status, raw = await exchange(
        server.port,
        "POST /api/runs HTTP/1.1\nHost: x\nContent-Type: application/json\n"
        f"Content-Length: {90 * MiB}\n",
        b'{"skill": "',
    )
    assert status == 401
    assert json.loads(raw.split(b"\r\n\r\n", 1)[1]) == {"detail": "missing or wrong API token"}


async def test_malformed_json_without_a_token_is_401_not_422(server: ServerProcess) -> None:
    async with server.client(token=None) as c:
        r = await c.post(
            "/api/runs", content=b"{not json", headers={"Content-Type": "application/json"}
        )
        wrong = await c.post(
            "/api/runs",
            content=b"{not json",
            headers={"Content-Type": "application/json", "Authorization": "Bearer nope"},
        )
    assert r.status_code == 401 and wrong.status_code == 401
    assert r.headers["www-authenticate"] == "Bearer"


async def test_a_large_api_body_with_the_token_gets_413(server: ServerProcess) -> None:
    status, raw = await exchange(
        server.port,
        "POST /api/runs HTTP/1.1\nHost: x\nContent-Type: application/json\n"
        f"Authorization: Bearer {TOKEN}\nContent-Length: {90 * MiB}\n",
    )
    assert status == 413
    assert json.loads(raw.split(b"\r\n\r\n", 1)[1]) == {
        "detail": "the body is larger than 1048576 bytes"
    }
    streamed_status = await chunked_past_limit(
        server.port,
        "POST /api/runs HTTP/1.1\nHost: x\nContent-Type: application/json\n"
        f"Authorization: Bearer {TOKEN}\n",
    )
    assert streamed_status in (413, None)
    async with server.client() as c:
        assert (await c.get("/api/runs")).status_code == 200  # and it goes on serving


@pytest.mark.parametrize(
    "path",
    [
        "/api/runs?limit=-1",
        "/api/runs?limit=0",
        f"/api/runs?limit={-(10**30)}",
        "/api/runs?limit=1001",
        "/api/audit?limit=-1",
        f"/api/audit?limit={-(10**30)}",
        "/api/audit?limit=5001",
    ],
)
async def test_list_limits_are_bounded(server: ServerProcess, path: str) -> None:
    async with server.client() as c:
        r = await c.get(path)
    assert r.status_code == 422
    assert r.json()["detail"][0]["loc"] == ["query", "limit"]


async def test_a_limit_in_bounds_is_honoured(server: ServerProcess) -> None:
    async with server.client() as c:
        for _ in range(2):  # each switch is audited
            assert (await c.post("/api/kill")).status_code == 200
            assert (await c.delete("/api/kill")).status_code == 200
        audit = await c.get("/api/audit?limit=1")
        runs = await c.get("/api/runs?limit=1")
    assert audit.status_code == 200 and len(audit.json()["items"]) == 1
    assert runs.status_code == 200 and runs.json() == {"items": []}
