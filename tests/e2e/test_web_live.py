"""The web page's long-poll over a real `pizzabot serve`: a live region's fragment asked for
with the fingerprint the page shows (`seen`) and a `wait`.

The stories: a request with the current fingerprint is held until a card arrives and then
answered with it; one with a stale fingerprint is answered at once; one whose wait ends
unchanged gets a 204; a session holds at most four at a time (429 beyond); a decision made
through the API answers an item page's held request; and nobody signed in gets anything.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio

from pizzabot.agent.testing.scripts import last_tool_result
from tests.peers.server import TOKEN, ServerProcess
from tests.peers.stack import Reply, Stack, ToolCall
from tests.waiting import eventually

pytestmark = pytest.mark.asyncio(loop_scope="module")

#: What a held request may wait, in seconds: longer than any test takes, so a request that
#: answers did so because something happened, not because its wait ran out.
HELD = "25"
#: The most the server holds one session's requests at once.
PER_SESSION = 4
#: Longer than a request answered at once takes, shorter than a held one's wait.
AT_ONCE = 10.0


def send_then_quote(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Reply:
    """Propose send_email once; afterwards say what the tool (or the rejection) said."""
    result = last_tool_result(messages)
    if result is None:
        email = {"to": "ann@example.com", "subject": "Your quote", "body": "Hello Ann"}
        return Reply(text="Mailing Ann.", tool_calls=[ToolCall("crm__send_email", email)])
    return Reply(text=f"Finished. The tool said: {result}")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def stack(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Stack]:
    async with Stack(tmp_path_factory.mktemp("live"), script=send_then_quote) as st:
        yield st


async def signed_in(stack: Stack) -> httpx.AsyncClient:
    """A browser's session: the login link swapped for the session cookie."""
    c = httpx.AsyncClient(base_url=stack.server.url, timeout=60, follow_redirects=True)
    r = await c.get("/login", params={"token": TOKEN})
    assert r.status_code == 200 and "Inbox" in r.text
    return c


async def ask(c: httpx.AsyncClient, path: str, seen: str, wait: str = HELD) -> httpx.Response:
    return await c.get(path, params={"seen": seen, "wait": wait})


async def hold_all(c: httpx.AsyncClient, path: str, seen: str) -> list[asyncio.Task[Any]]:
    """Asks of `path` with the fingerprint `seen`, as many as the session may hold, once the
    server holds every one: one more ask (with a wait too short to matter) is refused."""
    held = [asyncio.create_task(ask(c, path, seen)) for _ in range(PER_SESSION)]
    probe = (await c.get("/boxes")).headers["X-Live-Version"]

    async def all_held() -> bool:
        again = False
        for k, task in enumerate(held):
            if task.done():  # a probe took its slot first: refused, so ask again
                assert task.result().status_code == 429, task.result().text
                held[k] = asyncio.create_task(ask(c, path, seen))
                again = True
        if again:
            # No probe beside a new ask: the probe is held too while it is let in, and
            # reaching the server first it would take that slot and refuse the ask again.
            return False
        refused = (await ask(c, "/boxes", probe, wait="0.01")).status_code == 429
        return refused and not any(t.done() for t in held)

    await eventually(all_held, what=f"{PER_SESSION} asks of {path} to be held")
    return held


async def test_held_until_a_card_arrives_then_answered_with_it_and_capped_per_session(
    stack: Stack,
) -> None:
    c = await signed_in(stack)
    try:
        first = await c.get("/boxes")  # no fingerprint yet: answered at once
        assert first.status_code == 200 and "Nothing needs a decision" in first.text
        seen = first.headers["X-Live-Version"]

        # The session's four slots are taken by held asks: a fifth is refused.
        held = await hold_all(c, "/boxes", seen)

        run = await stack.start_run("test", "Send Ann the quote while the page waits")
        item = await stack.wait_item(run["id"])
        answers: list[httpx.Response] = await asyncio.gather(*held)
        for r in answers:
            assert r.status_code == 200
            assert f"/items/{item['id']}" in r.text  # the card that arrived while it waited
            assert r.headers["X-Live-Version"] != seen
        now = answers[0].headers["X-Live-Version"]

        # Answered, they gave their slots back; an unchanged list waits its wait out: 204.
        quiet = await ask(c, "/boxes", now, wait="0.05")
        assert quiet.status_code == 204 and quiet.headers["X-Live-Version"] == now
        await stack.decide(item["id"], "reject", reason="not now")
        await stack.wait_run(run["id"], {"done"})
    finally:
        await c.aclose()


async def test_a_stale_fingerprint_is_answered_at_once(stack: Stack) -> None:
    c = await signed_in(stack)
    try:
        async with asyncio.timeout(AT_ONCE):
            r = await ask(c, "/boxes", "0123456789abcdef")
        assert r.status_code == 200 and 'id="boxes"' in r.text
        assert r.headers["X-Live-Version"] != "0123456789abcdef"
    finally:
        await c.aclose()


async def test_a_decision_through_the_api_answers_an_item_pages_held_request(
    stack: Stack,
) -> None:
    run = await stack.start_run("test", "Send Ann the quote, decided elsewhere")
    item = await stack.wait_item(run["id"])
    c = await signed_in(stack)
    try:
        path = f"/items/{item['id']}/state"
        first = await c.get(path)
        assert 'data-version="pending"' in first.text
        seen = first.headers["X-Live-Version"]
        # The cap counts the session's held asks of every region: the inbox's is refused.
        held = await hold_all(c, path, seen)

        r = await stack.decide(item["id"], "approve")
        assert r.status_code == 200
        for answer in await asyncio.gather(*held):
            assert answer.status_code == 200 and 'data-version="approved"' in answer.text
        await stack.wait_run(run["id"], {"done"})
    finally:
        await c.aclose()


async def test_nobody_signed_in_gets_no_fragment_held_or_not(stack: Stack) -> None:
    async with httpx.AsyncClient(base_url=stack.server.url, timeout=AT_ONCE) as c:
        for path in ("/boxes", "/items/none/state", "/runs/none/live"):
            r = await ask(c, path, "0123456789abcdef")
            assert r.status_code == 401 and r.text == ""
            r = await c.get(path)
            assert r.status_code == 401


async def test_a_logout_elsewhere_ends_the_sessions_held_asks_with_401(stack: Stack) -> None:
    c = await signed_in(stack)
    other = httpx.AsyncClient(base_url=stack.server.url, timeout=60, cookies=c.cookies)
    try:
        first = await c.get("/boxes")
        held = await hold_all(c, "/boxes", first.headers["X-Live-Version"])
        # The same session's cookie, in another tab or on another device, logs out.
        page = await other.get("/")
        csrf = re.search(r'name="csrf" value="([^"]+)"', page.text)
        assert csrf is not None
        r = await other.post("/logout", data={"csrf": csrf.group(1)})
        assert r.status_code == 303
        for answer in await asyncio.gather(*held):
            assert answer.status_code == 401 and answer.text == ""
    finally:
        await other.aclose()
        await c.aclose()


async def test_a_stopping_server_answers_its_held_asks_instead_of_waiting_them_out(
    tmp_path: Path,
) -> None:
    (tmp_path / "skills").mkdir()
    server = ServerProcess(data_dir=tmp_path / "data", skills_dir=tmp_path / "skills")
    await server.start()
    try:
        async with httpx.AsyncClient(base_url=server.url, timeout=60, follow_redirects=True) as c:
            assert (await c.get("/login", params={"token": TOKEN})).status_code == 200
            seen = (await c.get("/boxes")).headers["X-Live-Version"]
            held = await hold_all(c, "/boxes", seen)
            await asyncio.to_thread(server.stop)  # SIGTERM, as a Ctrl-C or `docker stop`
            for answer in await asyncio.gather(*held):
                # Answered by the stopping server; one killed after waiting gives no answer.
                assert answer.status_code == 204
    finally:
        server.stop()
