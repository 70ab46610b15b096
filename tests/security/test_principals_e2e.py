"""Who decides, against a real `pizzabot serve` process: the credential an agent asks with
cannot decide, an approval counts only for the card its person saw, the person who asked is
never one of two approvers, and the kill switch holds requests.

An outside attack found that the one API token every agent used was the owner's: an agent
could approve its own request, lift the kill switch, revoke grants and count as one of the
two people a deploy needed; that a second approver's click on a card that still showed the
old arguments approved the edited ones; and that a pending request could be approved, and
its agent go ahead, with the kill switch on. Each test here is one of those attacks.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio
import yaml

from tests.peers.server import TOKEN, ServerProcess

pytestmark = pytest.mark.asyncio(loop_scope="module")

PEOPLE = {
    "alice": {"slack": "U0ALICE", "email": "alice@corp.example"},
    "bob": {"slack": "U0BOB", "email": "bob@corp.example"},
    "carol": {"email": "carol@corp.example"},
    "dave": {"email": "dave@corp.example"},  # a person, but no approver of these tools
}
DEPLOYS = {
    "name": "deploys",
    "people": PEOPLE,
    "approvers": ["alice", "bob", "carol"],
    "tools": {
        "deploy.prod": {"policy": "ask", "approvals": {"required": 2}},
        "deploy.restart": {"policy": "ask", "grants": ["1h"]},
        "deploy.rollback": {"policy": "ask", "self_approval": False},
        "deploy.note": {"policy": "ask"},
    },
}
VERSION_SCHEMA = {
    "type": "object",
    "properties": {"version": {"type": "string"}, "env": {"type": "string"}},
    "required": ["version", "env"],
}


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def server(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[ServerProcess]:
    root: Path = tmp_path_factory.mktemp("principals")
    skills = root / "skills"
    skills.mkdir()
    (skills / "deploys.yaml").write_text(yaml.safe_dump(DEPLOYS))
    proc = ServerProcess(data_dir=root / "data", skills_dir=skills)
    await proc.start()
    try:
        yield proc
    finally:
        proc.stop()


async def make_token(
    server: ServerProcess, name: str, scope: str, person: str | None = None
) -> dict[str, Any]:
    body = {"name": name, "scope": scope, **({"person": person} if person else {})}
    async with server.client() as c:
        r = await c.post("/api/tokens", json=body)
    assert r.status_code == 201, r.text
    made: dict[str, Any] = r.json()
    return made


async def ask(server: ServerProcess, token: str, **body: Any) -> dict[str, Any]:
    async with server.client(token) as c:
        r = await c.post("/api/requests", json={"skill": "deploys", **body})
    assert r.status_code == 201, r.text
    state: dict[str, Any] = r.json()
    return state


async def item_of(server: ServerProcess, item_id: str) -> dict[str, Any]:
    async with server.client() as c:
        r = await c.get(f"/api/items/{item_id}")
    assert r.status_code == 200, r.text
    item: dict[str, Any] = r.json()
    return item


async def decide(server: ServerProcess, token: str, item_id: str, **body: Any) -> httpx.Response:
    async with server.client(token) as c:
        return await c.post(f"/api/items/{item_id}/decision", json=body)


async def audit(server: ServerProcess, action: str) -> list[dict[str, Any]]:
    async with server.client() as c:
        entries = (await c.get("/api/audit", params={"limit": 1000})).json()["items"]
    return [e for e in entries if e["action"] == action]


async def test_an_ask_token_files_and_reads_its_own_requests_and_nothing_else(
    server: ServerProcess,
) -> None:
    agent = (await make_token(server, "deploy-agent", "ask"))["token"]
    other = (await make_token(server, "other-agent", "ask"))["token"]
    state = await ask(server, agent, title="Restart api", tool="deploy.restart", args={"n": 1})
    assert state["requested_by"] == "token:deploy-agent"

    async with server.client(agent) as c:
        mine = await c.get(f"/api/requests/{state['id']}")
        decided = await c.post(
            f"/api/items/{state['item_id']}/decision", json={"decision": "approve"}
        )
        kill = await c.post("/api/kill")
        lift = await c.delete("/api/kill")
        grants = await c.get("/api/grants")
        tokens = await c.post("/api/tokens", json={"name": "mine", "scope": "admin"})
        inbox = await c.get("/api/inbox")
    async with server.client(other) as c:
        theirs = await c.get(f"/api/requests/{state['id']}")

    assert mine.status_code == 200 and mine.json()["status"] == "pending"
    for refused in (decided, kill, lift, grants, tokens, inbox):
        assert refused.status_code == 403, refused.text
        assert "scope is ask" in refused.json()["detail"]
    assert theirs.status_code == 404  # another agent's request is not even there
    assert (await item_of(server, state["item_id"]))["status"] == "pending"
    # Every refusal is in the audit, with the token and what it asked for.
    refusals = [
        e for e in await audit(server, "scope_refused") if e["actor"] == "token:deploy-agent"
    ]
    routes = {e["detail"]["route"] for e in refusals}
    assert {"POST /api/kill", "DELETE /api/kill", "POST /api/tokens", "GET /api/grants"} <= routes
    assert all(e["detail"]["principal"] == "token deploy-agent (ask)" for e in refusals)
    async with server.client() as c:
        assert (await c.get("/api/kill")).json()["on"] is False


async def test_a_revoked_token_is_refused_at_once(server: ServerProcess) -> None:
    made = await make_token(server, "short-lived", "ask")
    async with server.client(made["token"]) as c:
        before = await c.post(
            "/api/requests",
            json={"skill": "deploys", "title": "Note", "tool": "deploy.note", "args": {}},
        )
    async with server.client() as c:
        revoked = await c.delete(f"/api/tokens/{made['id']}")
        listed = (await c.get("/api/tokens")).json()["items"]
    async with server.client(made["token"]) as c:
        after = await c.get(f"/api/requests/{before.json()['id']}")

    assert before.status_code == 201 and revoked.status_code == 200
    assert after.status_code == 401
    shown = next(t for t in listed if t["id"] == made["id"])
    assert shown["revoked_by"] == "owner" and "token" not in shown  # a secret is never listed
    assert [e["detail"]["name"] for e in await audit(server, "token_revoked")] == ["short-lived"]


async def test_a_decide_token_decides_as_its_person_and_only_what_they_approve(
    server: ServerProcess,
) -> None:
    agent = (await make_token(server, "note-agent", "ask"))["token"]
    carol = (await make_token(server, "carol-phone", "decide", person="carol"))["token"]
    stranger = (await make_token(server, "dave-phone", "decide", person="dave"))["token"]
    state = await ask(server, agent, title="Note it", tool="deploy.note", args={"text": "hi"})

    refused = await decide(server, stranger, state["item_id"], decision="approve")
    item = await item_of(server, state["item_id"])
    approved = await decide(
        server, carol, state["item_id"], decision="approve", seen=item["digest"]
    )

    assert refused.status_code == 403 and "not an approver" in refused.json()["detail"]
    assert approved.status_code == 200, approved.text
    assert (approved.json()["decided_by"], approved.json()["decided_via"]) == ("carol", "api")
    [entry] = [
        e for e in await audit(server, "decision_refused") if e["item_id"] == state["item_id"]
    ]
    assert entry["actor"] == "dave" and "token dave-phone" in entry["detail"]["principal"]


async def test_the_requester_is_never_one_of_two_approvers(server: ServerProcess) -> None:
    # Alice's own agent asks as alice: she is one person, whichever credential she uses.
    alice_agent = (await make_token(server, "alice-agent", "ask", person="alice"))["token"]
    alice = (await make_token(server, "alice-phone", "decide", person="alice"))["token"]
    bob = (await make_token(server, "bob-phone", "decide", person="bob"))["token"]
    args = {"version": "1.2.3", "env": "staging"}
    state = await ask(
        server,
        alice_agent,
        title="Ship 1.2.3",
        tool="deploy.prod",
        args=args,
        schema=VERSION_SCHEMA,
    )
    item_id = state["item_id"]

    own = await decide(server, alice, item_id, decision="approve")
    by_owner = await decide(server, TOKEN, item_id, decision="approve")
    by_bob = await decide(server, bob, item_id, decision="approve")
    assert own.status_code == 403 and "other people" in own.json()["detail"]
    assert by_owner.status_code == 200 and by_bob.status_code == 200, by_bob.text
    assert by_bob.json()["status"] == "approved"

    # self_approval: false refuses the requester outright, even where one person decides.
    state = await ask(server, alice_agent, title="Roll back", tool="deploy.rollback", args={})
    refused = await decide(server, alice, state["item_id"], decision="approve")
    assert refused.status_code == 403 and "self_approval: false" in refused.json()["detail"]
    rejected = await decide(server, alice, state["item_id"], decision="reject", reason="mine")
    assert rejected.status_code == 200  # withdrawing one's own request is always allowed


async def test_an_approval_counts_only_for_the_card_its_person_saw(server: ServerProcess) -> None:
    agent = (await make_token(server, "ship-agent", "ask"))["token"]
    bob = (await make_token(server, "bob-cli", "decide", person="bob"))["token"]
    carol = (await make_token(server, "carol-cli", "decide", person="carol"))["token"]
    args = {"version": "1.2.3", "env": "staging"}
    state = await ask(
        server, agent, title="Ship it", tool="deploy.prod", args=args, schema=VERSION_SCHEMA
    )
    item_id = state["item_id"]
    seen_by_carol = (await item_of(server, item_id))["digest"]

    # Bob edits: his edit is his approval and a new count, on a new version of the card.
    edited = {"version": "6.6.6-backdoor", "env": "prod"}
    r = await decide(server, bob, item_id, decision="edit", args=edited, seen=seen_by_carol)
    assert r.status_code == 200 and r.json()["status"] == "pending", r.text
    assert r.json()["version"] == 2 and r.json()["digest"] != seen_by_carol

    # Carol approves from the card that still showed 1.2.3: refused, nothing runs.
    stale = await decide(server, carol, item_id, decision="approve", seen=seen_by_carol)
    assert stale.status_code == 409, stale.text
    detail = stale.json()["detail"]
    assert "changed" in detail["message"] and detail["args"] == edited
    now = await item_of(server, item_id)
    assert now["status"] == "pending" and now["risk"]["approved"] == ["bob via the API"]
    [refusal] = [e for e in await audit(server, "decision_refused") if e["item_id"] == item_id]
    assert refusal["actor"] == "carol" and "card changed" in refusal["detail"]["why"]

    # From the new card, her approval counts, and the edited call is what was approved.
    fresh = await decide(server, carol, item_id, decision="approve", seen=now["digest"])
    assert fresh.status_code == 200 and fresh.json()["status"] == "edited", fresh.text
    assert fresh.json()["final_args"] == edited


async def test_the_web_form_of_an_old_page_does_not_approve_an_edited_call(
    server: ServerProcess,
) -> None:
    agent = (await make_token(server, "web-agent", "ask"))["token"]
    bob = (await make_token(server, "bob-web", "decide", person="bob"))["token"]
    carol = (await make_token(server, "carol-web", "decide", person="carol"))["token"]
    args = {"version": "2.0.0", "env": "staging"}
    state = await ask(
        server, agent, title="Ship 2.0", tool="deploy.prod", args=args, schema=VERSION_SCHEMA
    )
    item_id = state["item_id"]
    async with httpx.AsyncClient(base_url=server.url, follow_redirects=False) as web:
        login = await web.post("/login", data={"token": carol})
        assert login.status_code == 303, login.text
        page = (await web.get(f"/items/{item_id}")).text
        csrf = _hidden(page, "csrf")
        seen = _hidden(page, "seen")
        edited = {"version": "6.6.6", "env": "prod"}
        r = await decide(server, bob, item_id, decision="edit", args=edited)
        assert r.status_code == 200, r.text
        posted = await web.post(
            f"/items/{item_id}", data={"csrf": csrf, "decision": "approve", "seen": seen}
        )
    assert posted.status_code == 409
    assert "changed after the page showed it" in posted.text and "6.6.6" in posted.text
    assert (await item_of(server, item_id))["risk"]["approved"] == ["bob via the API"]


def _hidden(page: str, name: str) -> str:
    marker = f'name="{name}" value="'
    start = page.index(marker) + len(marker)
    return page[start : page.index('"', start)]


async def test_an_ask_token_cannot_sign_in_to_the_web_page(server: ServerProcess) -> None:
    agent = (await make_token(server, "web-login-agent", "ask"))["token"]
    async with httpx.AsyncClient(base_url=server.url, follow_redirects=False) as web:
        refused = await web.post("/login", data={"token": agent})
    assert refused.status_code == 403 and "scope is ask" in refused.text
    assert "pizzabot_session" not in refused.cookies
    [entry] = [e for e in await audit(server, "web_login_refused") if e["actor"] != "owner"]
    assert entry["detail"]["principal"] == "token web-login-agent (ask)"


async def test_the_kill_switch_holds_requests(server: ServerProcess) -> None:
    agent = (await make_token(server, "held-agent", "ask"))["token"]
    state = await ask(server, agent, title="Restart db", tool="deploy.restart", args={"n": 2})

    async def wait() -> dict[str, Any]:
        async with server.client(agent) as c:
            r = await c.get(f"/api/requests/{state['id']}", params={"wait": 30})
        answer: dict[str, Any] = r.json()
        return answer

    waiting = asyncio.create_task(wait())
    await asyncio.sleep(0.3)  # the long-poll is held (a decision or the switch answers it)
    async with server.client() as c:
        on = await c.post("/api/kill", json={"reason": "incident 42"})
    assert on.status_code == 200, on.text
    try:
        answer = await asyncio.wait_for(waiting, 20)
        approve = await decide(server, TOKEN, state["item_id"], decision="approve")
        async with server.client(agent) as c:
            later = (await c.get(f"/api/requests/{state['id']}")).json()
    finally:
        async with server.client() as c:
            await c.delete("/api/kill")

    assert answer["status"] == "halted" and "incident 42" in answer["reason"]
    assert approve.status_code == 409 and "incident 42" in approve.json()["detail"]
    assert later["status"] == "halted"
    assert (await item_of(server, state["item_id"]))["status"] == "pending"
    # Lifted: the request is pending again, and a decision counts.
    async with server.client(agent) as c:
        assert (await c.get(f"/api/requests/{state['id']}")).json()["status"] == "pending"
    assert (await decide(server, TOKEN, state["item_id"], decision="approve")).status_code == 200


def pizzabot(server: ServerProcess, token: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PIZZABOT_URL": server.url, "PIZZABOT_API_TOKEN": token, "COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, "-m", "pizzabot.bot.main", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


async def test_the_terminal_approves_an_edited_card_only_as_its_person_saw_it(
    server: ServerProcess,
) -> None:
    agent = (await make_token(server, "cli-agent", "ask"))["token"]
    bob = (await make_token(server, "bob-terminal", "decide", person="bob"))["token"]
    carol = (await make_token(server, "carol-terminal", "decide", person="carol"))["token"]
    args = {"version": "1.2.3", "env": "staging"}
    state = await ask(
        server,
        agent,
        title="Ship from the terminal",
        tool="deploy.prod",
        args=args,
        schema=VERSION_SCHEMA,
    )
    item_id = state["item_id"]
    # Carol looked at 1.2.3 in her terminal; then bob edited it.
    looked = await asyncio.to_thread(pizzabot, server, carol, "item", item_id)
    assert "1.2.3" in looked.stdout, looked.stderr
    edited = {"version": "6.6.6-backdoor", "env": "prod"}
    assert (await decide(server, bob, item_id, decision="edit", args=edited)).status_code == 200

    # `approve ITEM` without --seen does not bind what she never saw: refused, said why.
    blind = await asyncio.to_thread(pizzabot, server, carol, "approve", item_id)
    assert blind.returncode == 1 and "edited since it was made" in blind.stderr, blind.stderr
    assert "6.6.6-backdoor" in blind.stderr and "--seen" in blind.stderr
    blind_edit = await asyncio.to_thread(
        pizzabot, server, carol, "edit", item_id, "--set", "env=staging"
    )
    assert blind_edit.returncode == 1 and "edited since it was made" in blind_edit.stderr
    assert (await item_of(server, item_id))["risk"]["approved"] == ["bob via the API"]

    # With the digest `pizzabot item` shows now, her approval counts for the edited call.
    now = await item_of(server, item_id)
    shown = await asyncio.to_thread(pizzabot, server, carol, "item", item_id)
    assert now["digest"] in shown.stdout
    seen = await asyncio.to_thread(
        pizzabot, server, carol, "approve", item_id, "--seen", now["digest"]
    )
    assert seen.returncode == 0 and "edited" in seen.stdout, seen.stderr
    assert (await item_of(server, item_id))["final_args"] == edited


async def test_an_admin_token_that_names_nobody_is_the_owner_not_a_second_person(
    server: ServerProcess,
) -> None:
    agent = (await make_token(server, "pair-agent", "ask"))["token"]
    admin = (await make_token(server, "ops-admin", "admin"))["token"]
    args = {"version": "2.0.0", "env": "prod"}
    state = await ask(
        server, agent, title="Ship 2.0", tool="deploy.prod", args=args, schema=VERSION_SCHEMA
    )
    first = await decide(server, TOKEN, state["item_id"], decision="approve")
    again = await decide(server, admin, state["item_id"], decision="approve")

    assert first.status_code == 200 and first.json()["status"] == "pending", first.text
    assert again.status_code == 409 and "approved this already" in again.text, again.text
    item = await item_of(server, state["item_id"])
    assert item["status"] == "pending" and len(item["risk"]["approved"]) == 1


async def test_a_token_names_a_person_of_people_and_never_the_owner(
    server: ServerProcess,
) -> None:
    async with server.client() as c:
        as_owner = await c.post(
            "/api/tokens", json={"name": "sneaky", "scope": "decide", "person": "owner"}
        )
        typo = await c.post(
            "/api/tokens", json={"name": "typo", "scope": "decide", "person": "alcie"}
        )
        names = [t["name"] for t in (await c.get("/api/tokens")).json()["items"]]

    assert as_owner.status_code == 422 and "server's own token" in as_owner.text
    assert typo.status_code == 422 and "'alcie' is not in the people:" in typo.text
    assert "alice" in typo.text  # the names it could have been
    assert "sneaky" not in names and "typo" not in names


async def test_tokens_from_the_terminal_made_listed_and_revoked(server: ServerProcess) -> None:
    made = await asyncio.to_thread(
        pizzabot,
        server,
        TOKEN,
        "tokens",
        "create",
        "bob-laptop",
        "--scope",
        "decide",
        "--person",
        "bob",
    )
    assert made.returncode == 0, made.stderr
    secret = made.stdout.strip()  # only the secret on stdout, for $(...)
    assert secret.startswith("pzb_") and "\n" not in secret
    token_id = made.stderr.split(":")[0].strip()
    assert "token bob-laptop (decide as bob)" in made.stderr

    typo = await asyncio.to_thread(
        pizzabot,
        server,
        TOKEN,
        "tokens",
        "create",
        "zed-laptop",
        "--scope",
        "decide",
        "--person",
        "zed",
    )
    assert typo.returncode == 1 and "'zed' is not in the people:" in typo.stderr

    listed = await asyncio.to_thread(pizzabot, server, TOKEN, "tokens", "list")
    assert "bob-laptop" in listed.stdout and secret not in listed.stdout
    by_bob = await asyncio.to_thread(pizzabot, server, secret, "tokens", "list")
    assert by_bob.returncode == 1 and "scope is decide" in by_bob.stderr
    async with server.client(secret) as c:
        assert (await c.get("/api/inbox")).status_code == 200

    revoked = await asyncio.to_thread(pizzabot, server, TOKEN, "tokens", "revoke", token_id)
    assert revoked.returncode == 0 and "token bob-laptop revoked" in revoked.stdout
    async with server.client(secret) as c:
        assert (await c.get("/api/inbox")).status_code == 401
    after = await asyncio.to_thread(pizzabot, server, TOKEN, "tokens", "list")
    assert "by owner" in after.stdout
