"""The Python client on its own: what it sends, how it retries, what its errors say, and that
importing it loads no part of the server. The server here is a raw HTTP peer on loopback
that can drop a connection mid-request, which no well-behaved server does on cue."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
import pytest_asyncio

from pizzabot.client import AsyncInbox, Inbox, InboxError, RequestState, Retry
from tests.imports import loaded_by

TOKEN = "client-test-token"
DECIDED = {
    "id": "req_1",
    "item_id": "itm_1",
    "kind": "approval",
    "status": "edited",
    "args": {"env": "staging"},
    "reason": None,
    "decided_by": "ann",
    "via": "web",
    "decided_at": "2026-12-01T09:00:00+00:00",
    "url": "http://pizza.test/items/itm_1",
}
PENDING = {**DECIDED, "status": "pending", "args": None, "decided_by": None, "via": None}


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


#: What the peer does with the n-th request: answer (status, JSON) or drop the connection.
Answer = tuple[int, Any] | None


@dataclass
class RawPeer:
    answers: list[Answer]
    seen: list[Seen] = field(default_factory=list)
    url: str = ""

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
        except asyncio.IncompleteReadError:
            writer.close()
            return
        line, *rest = head.split("\r\n")
        method, path, _ = line.split(" ", 2)
        headers = {
            k.strip().lower(): v.strip()
            for k, _, v in (h.partition(":") for h in rest if h.strip())
        }
        body = await reader.readexactly(int(headers.get("content-length", "0")))
        self.seen.append(Seen(method, path, headers, body))
        answer = self.answers.pop(0)
        if answer is None:
            writer.transport.abort()  # a dropped connection: no response at all
            return
        status, payload = answer
        data = json.dumps(payload).encode()
        writer.write(
            f"HTTP/1.1 {status} X\r\ncontent-type: application/json\r\n"
            f"content-length: {len(data)}\r\nconnection: close\r\n\r\n".encode()
            + data
        )
        await writer.drain()
        writer.close()


@pytest_asyncio.fixture
async def peer() -> AsyncIterator[Callable[..., Awaitable[RawPeer]]]:
    """Starts raw peers that give `answers` in order; all are closed after the test."""
    servers: list[asyncio.Server] = []

    async def start(*answers: Answer) -> RawPeer:
        p = RawPeer(list(answers))
        server = await asyncio.start_server(p.handle, "127.0.0.1", 0)
        servers.append(server)
        p.url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
        return p

    yield start
    for server in servers:
        server.close()
        await server.wait_closed()


class NoSleep:
    """Records the pauses the client asks for instead of taking them."""

    def __init__(self) -> None:
        self.pauses: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.pauses.append(seconds)

    def sync(self, seconds: float) -> None:
        self.pauses.append(seconds)


async def test_a_dropped_connection_is_retried_with_the_same_idempotency_key(peer: Any) -> None:
    p = await peer(
        None,  # the first POST reaches the server, which dies before answering
        (503, {"detail": "starting"}),
        (200, PENDING),
    )
    sleep = NoSleep()
    async with AsyncInbox(p.url, TOKEN, sleep=sleep) as inbox:
        decision = await inbox.request(
            "deploys",
            title="Deploy",
            tool="deploy",
            args={"env": "prod"},
            risk={"impact": "high", "reversible": False, "scope": "external"},
        )
    assert decision.pending and decision.id == "req_1" and decision.kind == "approval"
    posts = [s for s in p.seen if s.method == "POST"]
    assert len(posts) == 3
    keys = {s.headers["idempotency-key"] for s in posts}
    assert len(keys) == 1 and keys.pop().startswith("pzb-")
    assert {s.body for s in posts} == {posts[0].body}
    body = json.loads(posts[0].body)
    assert body == {
        "wire": 1,
        "skill": "deploys",
        "title": "Deploy",
        "tool": "deploy",
        "args": {"env": "prod"},
        "risk": {"impact": "high", "reversible": False, "scope": "external"},
    }
    assert all(s.headers["authorization"] == f"Bearer {TOKEN}" for s in posts)
    assert sleep.pauses == [0.5, 1.0]


async def test_two_requests_get_two_keys_and_a_given_key_is_sent_as_it_is(peer: Any) -> None:
    p = await peer((201, PENDING), (201, PENDING), (201, PENDING))
    async with AsyncInbox(p.url, TOKEN) as inbox:
        for _ in range(2):
            await inbox.request("s", title="t", tool="x", args={})
        await inbox.question("s", question="Which day?\nAny weekday.", idempotency_key="mine-1")
    keys = [s.headers["idempotency-key"] for s in p.seen]
    assert keys[0] != keys[1] and keys[2] == "mine-1"
    assert json.loads(p.seen[2].body) == {
        "wire": 1,
        "skill": "s",
        "title": "Which day?",
        "question": "Which day?\nAny weekday.",
    }


async def test_a_refusal_is_one_error_with_status_and_detail_and_is_not_retried(peer: Any) -> None:
    detail = [{"loc": ["body", "skill"], "msg": "Field required", "type": "missing"}]
    p = await peer((422, {"detail": detail}), (409, {"detail": "key reused"}))
    async with AsyncInbox(p.url, TOKEN, sleep=NoSleep()) as inbox:
        with pytest.raises(InboxError) as refused:
            await inbox.request("s", title="t", tool="x", args={})
        assert refused.value.status == 422 and refused.value.detail == detail
        with pytest.raises(InboxError) as conflict:
            await inbox.request("s", title="t", tool="x", args={}, idempotency_key="k")
        assert conflict.value.status == 409 and str(conflict.value) == "409: key reused"
    assert len(p.seen) == 2


async def test_a_server_that_is_not_there_is_an_error_without_status() -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    sleep = NoSleep()
    async with AsyncInbox(f"http://127.0.0.1:{port}", TOKEN, sleep=sleep, retry=Retry(2)) as inbox:
        with pytest.raises(InboxError) as down:
            await inbox.get("req_1")
    assert down.value.status is None and "cannot reach the inbox" in str(down.value)
    assert sleep.pauses == [0.5]  # tried twice


async def test_until_decided_polls_with_server_sized_waits_until_a_decision(peer: Any) -> None:
    pending = {**DECIDED, "status": "pending", "args": None, "decided_by": None, "via": None}
    p = await peer((200, pending), None, (200, pending), (200, DECIDED))
    async with AsyncInbox(p.url, TOKEN, sleep=NoSleep()) as inbox:
        decision = await inbox.until_decided("req_1")
    assert decision.edited and decision.approved and decision.args == {"env": "staging"}
    assert decision.decided_by == "ann" and decision.via == "web"
    assert [s.path for s in p.seen] == ["/api/requests/req_1?wait=60"] * 4


async def test_waiting_outlasts_a_server_that_is_away_for_a_while(peer: Any) -> None:
    # More dropped polls in a row than one request's tries: a restart that takes a while.
    p = await peer(*[None] * 6, (502, "bad gateway"), (200, DECIDED))
    sleep = NoSleep()
    async with AsyncInbox(p.url, TOKEN, sleep=sleep) as inbox:
        decision = await inbox.until_decided("req_1")
    assert decision.edited and len(p.seen) == 8
    # Bad input is not waited out.
    async with AsyncInbox(p.url, TOKEN, sleep=sleep) as inbox:
        with pytest.raises(InboxError, match="not a request id"):
            await inbox.until_decided("a/b")


async def test_waiting_gives_up_on_an_unreachable_server_at_its_deadline(peer: Any) -> None:
    p = await peer(*[None] * 8)
    now = [0.0]

    async def sleep(seconds: float) -> None:
        now[0] += seconds

    async with AsyncInbox(p.url, TOKEN, sleep=sleep, clock=lambda: now[0]) as inbox:
        with pytest.raises(InboxError, match="cannot reach the inbox") as gone:
            await inbox.until_decided("req_1", timeout=5)
    assert gone.value.status is None and now[0] >= 5


async def test_until_decided_gives_back_the_pending_request_when_its_time_is_up(
    peer: Any,
) -> None:
    pending = {**DECIDED, "status": "pending", "args": None}
    p = await peer((200, pending), (200, pending))

    def clock() -> float:
        return 100.0 + 60.0 * len(p.seen)  # each long poll is held for its whole minute

    async with AsyncInbox(p.url, TOKEN, clock=clock) as inbox:
        decision = await inbox.until_decided("req_1", timeout=75)
    assert decision.pending
    assert [s.path.partition("wait=")[2] for s in p.seen] == ["60", "15"]


async def test_the_sync_inbox_is_the_same_client(peer: Any) -> None:
    p = await peer(None, (201, DECIDED))
    sleep = NoSleep()

    def call() -> RequestState:
        with Inbox(p.url, TOKEN, sleep=sleep.sync) as inbox:
            return inbox.request("s", title="t", tool="x", args={"a": 1})

    decision = await asyncio.to_thread(call)
    # Decided at once (a rule or grant): the answer to the POST is the whole state.
    assert decision.status == "edited" and decision.args == {"env": "staging"}
    assert decision.created
    posts = [s for s in p.seen if s.method == "POST"]
    assert len(p.seen) == len(posts) == 2
    assert len({s.headers["idempotency-key"] for s in posts}) == 1
    assert sleep.pauses == [0.5]


def test_bad_input_is_refused_before_anything_is_sent() -> None:
    with pytest.raises(InboxError, match="http:// or https://"):
        Inbox("ftp://x", TOKEN)
    with pytest.raises(InboxError, match="no API token"):
        Inbox("http://x", "")
    with Inbox("http://127.0.0.1:9", TOKEN) as inbox:
        with pytest.raises(InboxError, match="not a request id"):
            inbox.get("../items")
        with pytest.raises(InboxError, match="wait must be"):
            inbox.get("req_1", wait=float("nan"))


def test_importing_the_client_loads_no_part_of_the_server() -> None:
    heavy = ["fastapi", "litellm", "sqlalchemy", "starlette", "agent", "store", "channels"]
    server = ["uvicorn", "pizzabot.bot.server", "pizzabot.bot.core", "pizzabot.bot.settings"]
    assert loaded_by(["pizzabot.client"], among=heavy + server) == []
