"""Requests over HTTP, end to end: a real `pizzabot serve` process, an inbox-only skill, and
agents asking through `POST /api/requests` — decided through the items API, by the skill's
rules and grants, or by the clock; answered by long-polls; and posted, signed, to a callback
receiver that fails first."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import socket
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import pytest_asyncio
import uvicorn
import yaml
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from tests.peers.server import ServerProcess
from tests.waiting import eventually

pytestmark = pytest.mark.asyncio(loop_scope="module")

SECRET = "callback-secret-0123456789"

INBOX_ONLY = {
    "name": "deploys",
    "description": "approvals asked by the deploy agent",
    "callback_secret_env": "TEST_CALLBACK_SECRET",
    "tools": {
        "deploy.prod": {
            "policy": "ask",
            "impact": "high",
            "rules": [
                {"when": {"env": "staging"}, "policy": "auto"},
                {"when": {"env": "prod-eu"}, "policy": "deny", "reason": "EU change freeze"},
            ],
        },
        "deploy.restart": {"policy": "ask", "grants": ["1h", "exact"]},
        "ask_human": {"timeout": "1h"},
    },
}
MODEL_SKILL = {
    "name": "writer",
    "instructions": "Write.",
    "model": "openai/none",
}


class Receiver:
    """A callback receiver on loopback: answers 500 to the first `fail_first` posts."""

    def __init__(self, fail_first: int = 1) -> None:
        self.fail_first = fail_first
        self.posts: list[tuple[dict[str, str], bytes]] = []
        self.app = FastAPI()
        self.app.post("/hook")(self._hook)
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self.port = self._sock.getsockname()[1]
        self._server = uvicorn.Server(uvicorn.Config(self.app, log_level="warning"))
        self._task: asyncio.Task[None] | None = None

    async def _hook(self, request: Request) -> JSONResponse:
        self.posts.append((dict(request.headers), await request.body()))
        if len(self.posts) <= self.fail_first:
            return JSONResponse({"error": "not now"}, 500)
        return JSONResponse({"ok": True})

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    async def __aenter__(self) -> Receiver:
        self._task = asyncio.create_task(self._server.serve(sockets=[self._sock]))
        await eventually(lambda: self._server.started or None, what="the receiver to start")
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._server.should_exit = True
        if self._task is not None:
            await self._task


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def server(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[ServerProcess]:
    root = tmp_path_factory.mktemp("requests")
    skills = root / "skills"
    skills.mkdir()
    (skills / "deploys.yaml").write_text(yaml.safe_dump(INBOX_ONLY))
    (skills / "writer.yaml").write_text(yaml.safe_dump(MODEL_SKILL))
    proc = ServerProcess(
        data_dir=root / "data",
        skills_dir=skills,
        env={
            "TEST_CALLBACK_SECRET": SECRET,
            "PIZZABOT_TIMERS_INTERVAL": "0.2",
            "PIZZABOT_POLL_INTERVAL": "0.2",
        },
    )
    await proc.start()
    try:
        yield proc
    finally:
        proc.stop()


async def ask(
    server: ServerProcess, body: dict[str, Any], *, key: str | None = None, status: int = 201
) -> dict[str, Any]:
    headers = {"Idempotency-Key": key} if key else {}
    async with server.client() as c:
        r = await c.post("/api/requests", json=body, headers=headers)
    assert r.status_code == status, r.text
    data: dict[str, Any] = r.json()
    return data


async def get(server: ServerProcess, request_id: str, wait: float = 0) -> dict[str, Any]:
    async with server.client() as c:
        r = await c.get(f"/api/requests/{request_id}", params={"wait": wait}, timeout=wait + 30)
    assert r.status_code == 200, r.text
    data: dict[str, Any] = r.json()
    return data


async def decide(server: ServerProcess, item_id: str, **body: Any) -> None:
    async with server.client() as c:
        r = await c.post(f"/api/items/{item_id}/decision", json=body)
    assert r.status_code == 200, r.text


def deploy(env: str, **more: Any) -> dict[str, Any]:
    return {
        "skill": "deploys",
        "title": f"Deploy to {env}",
        "tool": "deploy.prod",
        "args": {"env": env, "version": "1.2.3"},
        **more,
    }


async def run_of(server: ServerProcess, run_id: str) -> dict[str, Any]:
    async with server.client() as c:
        data: dict[str, Any] = (await c.get(f"/api/runs/{run_id}")).json()
    return data


async def test_a_request_is_an_action_item_and_its_approval_ends_its_run(
    server: ServerProcess,
) -> None:
    created = await ask(server, deploy("prod", description="Ship the fix for the login bug"))
    assert created["status"] == "pending" and created["kind"] == "approval"
    assert created["url"].endswith(f"/items/{created['item_id']}")
    async with server.client() as c:
        action = (await c.get("/api/inbox", params={"box": "action"})).json()["items"]
    (item,) = [i for i in action if i["id"] == created["item_id"]]
    assert (item["tool"], item["args"], item["status"]) == (
        "deploy.prod",
        {"env": "prod", "version": "1.2.3"},
        "pending",
    )
    assert item["title"] == "Deploy to prod" and item["body"] == "Ship the fix for the login bug"
    assert item["risk"]["impact"] == "high"

    await decide(server, item["id"], decision="approve")
    state = await get(server, created["id"])
    assert (state["status"], state["args"]) == ("approved", {"env": "prod", "version": "1.2.3"})
    assert (state["decided_by"], state["via"]) == ("owner", "api")
    # The decision re-queues the run, and the engine ends it: no model, no Unread note.
    run = await server.wait_for(
        lambda c: _run_done(c, item["run_id"]), what="the request's run to end"
    )
    assert run["trigger"] == "request" and run["result"] == "approved by owner via api"
    assert [e["kind"] for e in run["events"]] == [
        "run_started",
        "tool_request",
        "decision",
        "run_finished",
    ]
    async with server.client() as c:
        unread = (await c.get("/api/inbox", params={"box": "unread", "all": True})).json()
    assert all(i["run_id"] != item["run_id"] for i in unread["items"])


async def _run_done(c: httpx.AsyncClient, run_id: str) -> dict[str, Any] | None:
    run: dict[str, Any] = (await c.get(f"/api/runs/{run_id}")).json()
    return run if run["status"] == "done" else None


async def test_edit_and_reject_say_the_final_arguments_and_the_reason(
    server: ServerProcess,
) -> None:
    edited = await ask(server, deploy("prod"))
    await decide(
        server, edited["item_id"], decision="edit", args={"env": "prod", "version": "1.2.4"}
    )
    state = await get(server, edited["id"])
    assert (state["status"], state["args"]) == ("edited", {"env": "prod", "version": "1.2.4"})

    rejected = await ask(server, deploy("prod"))
    await decide(server, rejected["item_id"], decision="reject", reason="not on a Friday")
    state = await get(server, rejected["id"])
    assert (state["status"], state["args"], state["reason"]) == (
        "rejected",
        None,
        "not on a Friday",
    )


async def test_one_decision_answers_every_waiting_long_poll_at_once(
    server: ServerProcess,
) -> None:
    created = await ask(server, deploy("prod"))
    waiters = [asyncio.create_task(get(server, created["id"], wait=30)) for _ in range(4)]
    # Every long-poll is held: none answers while the request is pending.
    await server.wait_for(
        lambda c: _item_pending(c, created["item_id"]), what="the item to be pending"
    )
    await asyncio.sleep(0)
    assert not any(w.done() for w in waiters)
    await decide(server, created["item_id"], decision="approve")
    answers = await asyncio.wait_for(asyncio.gather(*waiters), 25)
    assert [a["status"] for a in answers] == ["approved"] * 4
    # A wait that ends undecided answers pending.
    other = await ask(server, deploy("prod"))
    assert (await get(server, other["id"], wait=0.5))["status"] == "pending"


async def _item_pending(c: httpx.AsyncClient, item_id: str) -> bool:
    return bool((await c.get(f"/api/items/{item_id}")).json()["status"] == "pending")


async def test_the_same_key_is_the_same_request_and_another_body_is_a_conflict(
    server: ServerProcess,
) -> None:
    first = await ask(server, deploy("prod"), key="deploy-42")
    again = await ask(server, deploy("prod"), key="deploy-42", status=200)
    assert again["id"] == first["id"] and again["item_id"] == first["item_id"]
    async with server.client() as c:
        r = await c.post(
            "/api/requests", json=deploy("prod-us"), headers={"Idempotency-Key": "deploy-42"}
        )
    assert r.status_code == 409 and "Idempotency-Key" in r.json()["detail"], r.text


async def test_rules_decide_without_an_item_to_decide(server: ServerProcess) -> None:
    auto = await ask(server, deploy("staging"))
    assert (auto["status"], auto["decided_by"], auto["via"]) == (
        "approved",
        "rule 1 of deploy.prod",
        "policy",
    )
    denied = await ask(server, deploy("prod-eu"))
    assert (denied["status"], denied["reason"], denied["via"]) == (
        "rejected",
        "EU change freeze",
        "policy",
    )
    async with server.client() as c:
        pending = (await c.get("/api/inbox", params={"box": "action"})).json()["items"]
    assert not {auto["item_id"], denied["item_id"]} & {i["id"] for i in pending}
    run = await run_of(server, (await _item(server, auto["item_id"]))["run_id"])
    assert run["status"] == "done"


async def _item(server: ServerProcess, item_id: str) -> dict[str, Any]:
    async with server.client() as c:
        data: dict[str, Any] = (await c.get(f"/api/items/{item_id}")).json()
    return data


async def test_a_grant_approves_the_next_requests_it_covers(server: ServerProcess) -> None:
    body = {
        "skill": "deploys",
        "title": "Restart the web pods",
        "tool": "deploy.restart",
        "args": {"service": "web"},
    }
    first = await ask(server, body)
    item = await _item(server, first["item_id"])
    assert item["grants"] == ["1h", "exact"]  # a request's run is one call: no "run" grant
    await decide(server, first["item_id"], decision="approve", grant="exact")
    # The grant is kept when the request's run ends.
    async with server.client() as c:

        async def granted() -> list[dict[str, Any]] | None:
            items: list[dict[str, Any]] = (await c.get("/api/grants")).json()["items"]
            return items or None

        (grant,) = await eventually(granted, what="the grant to be kept")
    second = await ask(server, body)
    assert second["status"] == "approved" and second["via"] == "grant"
    assert grant["id"] in second["decided_by"]
    other = await ask(server, {**body, "args": {"service": "db"}})
    assert other["status"] == "pending"  # "exact" covers these arguments only


async def test_a_request_with_a_timeout_expires(server: ServerProcess) -> None:
    created = await ask(server, deploy("prod", timeout=1))
    state = await get(server, created["id"], wait=30)
    assert state["status"] == "expired" and state["decided_by"] == "timeout"
    assert state["reason"] == "no one answered within 1s"


async def test_a_question_is_answered_declined_or_expires(server: ServerProcess) -> None:
    body = {"skill": "deploys", "title": "Which region?", "question": "Where do we deploy?"}
    asked = await ask(server, body)
    item = await _item(server, asked["item_id"])
    assert (item["kind"], item["body"], item["tool"]) == ("question", "Where do we deploy?", None)
    assert item["schema"]["properties"]["answer"]["type"] == "string"
    await decide(server, asked["item_id"], decision="edit", args={"answer": "eu-west"})
    state = await get(server, asked["id"])
    assert (state["kind"], state["status"], state["args"]) == (
        "question",
        "answered",
        {"answer": "eu-west"},
    )
    declined = await ask(server, body)
    await decide(server, declined["item_id"], decision="reject", reason="ask ops")
    assert (await get(server, declined["id"]))["status"] == "declined"
    short = await ask(server, {**body, "timeout": 1})
    assert (await get(server, short["id"], wait=30))["status"] == "expired"
    # A form: its required fields are the person's to fill in, not the asker's.
    form = {"type": "object", "properties": {"region": {"type": "string", "enum": ["eu", "us"]}}}
    form["required"] = ["region"]
    formed = await ask(server, {**body, "schema": form})
    assert (await _item(server, formed["item_id"]))["schema"] == form
    await decide(server, formed["item_id"], decision="edit", args={"region": "us"})
    assert (await get(server, formed["id"]))["args"] == {"region": "us"}


async def test_the_callback_is_signed_and_retried_after_a_failure(server: ServerProcess) -> None:
    async with Receiver(fail_first=1) as receiver:
        created = await ask(server, deploy("prod", callback_url=receiver.url))
        assert receiver.posts == []  # nothing is posted while it is pending
        await decide(server, created["item_id"], decision="reject", reason="wait for QA")
        await eventually(
            lambda: len(receiver.posts) >= 2 or None,
            what="the callback to be posted again after the 500",
            context=server.log,
        )
    for headers, body in receiver.posts[:2]:
        stamp = headers["x-pizzabot-timestamp"]
        signed = b"pizzabot-callback-v1\n" + stamp.encode() + b"\n" + created["id"].encode()
        signed += b"\n" + body
        expected = "sha256=" + hmac.new(SECRET.encode(), signed, hashlib.sha256).hexdigest()
        assert hmac.compare_digest(headers["x-pizzabot-signature"], expected)
        assert headers["idempotency-key"] == created["id"]
        posted = json.loads(body)
        assert (posted["id"], posted["status"], posted["reason"]) == (
            created["id"],
            "rejected",
            "wait for QA",
        )
    assert len(receiver.posts) == 2  # delivered once it was answered 200


async def test_a_request_a_rule_decides_calls_back_at_once(server: ServerProcess) -> None:
    async with Receiver(fail_first=0) as receiver:
        created = await ask(server, deploy("staging", callback_url=receiver.url))
        assert created["status"] == "approved"
        await eventually(
            lambda: receiver.posts or None, what="the callback to be posted", context=server.log
        )
    ((headers, body),) = receiver.posts
    assert headers["idempotency-key"] == created["id"]
    assert json.loads(body)["decided_by"] == "rule 1 of deploy.prod"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({**deploy("prod"), "skill": "nosuch"}, "skill"),
        ({**deploy("prod"), "title": "x" * 201}, "title"),
        ({**deploy("prod"), "timeout": 0}, "timeout"),
        ({**deploy("prod"), "callback_url": "ftp://example.test/x"}, "callback_url"),
        ({**deploy("prod"), "callback_url": "http://u:p@127.0.0.1/x"}, "callback_url"),
        ({**deploy("prod"), "callback_url": "http://[::1]:8080/x"}, "not an [IPv6] literal"),
        ({**deploy("prod"), "callback_url": "http://127.0.0.1:70000/x"}, "not a URL"),
        ({**deploy("prod"), "callback_url": "https://cb.example/é"}, "percent-encode"),
        ({**deploy("prod"), "question": "and a question?"}, "not both"),
        ({**deploy("prod"), "schema": {"type": "object", "properties": 3}}, "schema"),
        ({**deploy("prod"), "schema": {"type": "string"}}, "schema"),
        (
            {
                **deploy("prod"),
                "schema": {"type": "object", "properties": {"env": {"type": "integer"}}},
            },
            "args.env",
        ),
        ({**deploy("prod"), "args": {"blob": "x" * 70_000}}, "args"),
        ({"skill": "deploys", "title": "nothing asked"}, "tool"),
        (
            {
                "skill": "deploys",
                "title": "a nested form",
                "question": "Where?",
                "schema": {"type": "object", "properties": {"a": {"type": "object"}}},
            },
            "schema",
        ),
    ],
)
async def test_a_bad_request_is_refused_naming_the_field(
    server: ServerProcess, body: dict[str, Any], field: str
) -> None:
    async with server.client() as c:
        r = await c.post("/api/requests", json=body)
    assert r.status_code == 422, r.text
    assert field in json.dumps(r.json()["detail"]), r.text


async def test_a_skill_with_a_model_answers_no_requests_and_no_run_of_deploys_starts(
    server: ServerProcess,
) -> None:
    async with server.client() as c:
        r = await c.post("/api/requests", json={**deploy("prod"), "skill": "writer"})
        assert r.status_code == 422 and "inbox-only" in r.text, r.text
        r = await c.post("/api/runs", json={"skill": "deploys", "input": "go"})
        assert r.status_code == 422, r.text
        assert "deploys is inbox-only: it answers requests" in r.text


async def test_no_token_no_request(server: ServerProcess) -> None:
    async with server.client(token=None) as c:
        assert (await c.post("/api/requests", json=deploy("prod"))).status_code == 401
        assert (await c.get("/api/requests/x")).status_code == 401
    async with server.client() as c:
        assert (await c.get("/api/requests/nosuch")).status_code == 404
        assert (await c.get("/api/requests/x", params={"wait": 61})).status_code == 422


async def test_the_kill_switch_refuses_new_requests_not_repeats(server: ServerProcess) -> None:
    made = await ask(server, deploy("prod"), key="before-the-kill")
    async with server.client() as c:
        assert (await c.post("/api/kill")).status_code == 200
        try:
            r = await c.post("/api/requests", json=deploy("prod"))
            assert r.status_code == 409 and "kill switch" in r.text, r.text
            # An agent asking again for what it asked before gets it: nothing new starts.
            again = await ask(server, deploy("prod"), key="before-the-kill", status=200)
            assert again["id"] == made["id"]
        finally:
            assert (await c.delete("/api/kill")).status_code == 200
