"""Claude Code's `http` hook: its real hook input posted to `POST /api/hooks/claude-code` of a
served bot with the shipped skills, as Claude Code posts it, and the exact JSON it reads
back — approve, edit, reject, no decision in time, a read-only command, and every failure
answered 200 with a deny (Claude Code lets a PreToolUse call through on any other answer)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import pytest_asyncio

from tests.e2e.test_hooks import CWD, ROOT, card, claude_permission, claude_pre, decide, payload
from tests.peers.server import TOKEN, ServerProcess

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def server(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[ServerProcess]:
    proc = ServerProcess(
        data_dir=tmp_path_factory.mktemp("http-hooks") / "data",
        skills_dir=ROOT / "manifests" / "skills",  # what `make serve` loads
        env={"PIZZABOT_TIMERS_INTERVAL": "0.2"},
    )
    await proc.start()
    try:
        yield proc
    finally:
        proc.stop()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def ask_token(server: ServerProcess) -> str:
    async with server.client() as c:
        r = await c.post("/api/tokens", json={"name": "laptop-hook", "scope": "ask"})
        assert r.status_code == 201, r.text
        return str(r.json()["token"])


PRE, PERMISSION = "claude-code-pre-tool-use", "claude-code-permission-request"


async def post(
    server: ServerProcess,
    token: str,
    body: object,
    *,
    timeout: int = 120,
    host: str = "claude-code",
) -> tuple[int, Any]:
    async with httpx.AsyncClient(base_url=server.url, timeout=90) as c:
        r = await c.post(
            f"/api/hooks/{host}",
            params={"timeout": timeout},
            content=body if isinstance(body, bytes) else json.dumps(body).encode(),
            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        )
    return r.status_code, r.json()


async def test_an_approval_allows_and_the_card_says_who_where_and_what(
    server: ServerProcess,
    ask_token: str,
) -> None:
    command = "rm -rf build/http"
    asked = asyncio.ensure_future(post(server, ask_token, payload(PRE, command)))
    item = await card(server, f"Claude Code: {command}")
    assert item["requested_by"] == "token:laptop-hook" and item["args"]["command"] == command
    assert f"Working directory: {CWD}" in item["body"]
    assert "Repository:" not in item["body"]  # the server never reads the agent's disk
    await decide(server, item["id"], decision="approve")
    code, out = await asked
    assert (code, out) == (200, claude_pre(True, "Approved by owner via api in Pizza Bot")[1])


async def test_an_edit_hands_back_the_persons_input_and_a_rejection_its_reason(
    server: ServerProcess,
    ask_token: str,
) -> None:
    edited_call = asyncio.ensure_future(post(server, ask_token, payload(PERMISSION, "make a")))
    item = await card(server, "Claude Code: make a")
    edited = {**item["args"], "command": "make b"}
    await decide(server, item["id"], decision="edit", args=edited)
    assert await edited_call == (
        200,
        claude_permission(True, "Edited by owner via api in Pizza Bot", edited)[1],
    )
    rejected_call = asyncio.ensure_future(post(server, ask_token, payload(PRE, "make c")))
    item = await card(server, "Claude Code: make c")
    await decide(server, item["id"], decision="reject", reason="not today")
    assert await rejected_call == (
        200,
        claude_pre(False, "Rejected by owner via api: not today")[1],
    )


async def test_no_decision_in_time_and_a_read_only_command(
    server: ServerProcess,
    ask_token: str,
) -> None:
    late = await post(server, ask_token, payload(PRE, "make late"), timeout=10)
    reason = (
        "No one decided in Pizza Bot within 5 s, so the call was not run; do not retry it "
        "unless asked."
    )
    assert late == (200, claude_pre(False, reason)[1])
    read_only = await post(server, ask_token, payload(PRE, "git status --short"))
    why = "Allowed by rule 4 of shell.run in Pizza Bot (no one was asked)"
    assert read_only == (200, claude_pre(True, why)[1])


async def test_every_failure_is_a_deny_claude_code_reads(
    server: ServerProcess,
    ask_token: str,
) -> None:
    code, out = await post(server, ask_token, b"{not json")
    assert code == 200 and out["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert "could not read Claude Code's hook input" in json.dumps(out)

    # The server's own token may decide: the agent holding it could approve its own calls.
    code, out = await post(server, TOKEN, payload(PRE, "make owner"))
    assert code == 200 and out["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert "may also decide" in out["hookSpecificOutput"]["permissionDecisionReason"]

    async with server.client() as c:
        r = await c.post(
            "/api/hooks/claude-code",
            params={"skill": "nosuch"},
            content=json.dumps(payload(PRE, "make x")),
            headers={"Authorization": f"Bearer {ask_token}"},
        )
    out = r.json()["hookSpecificOutput"]
    assert r.status_code == 200 and out["permissionDecision"] == "deny"
    assert out["permissionDecisionReason"].endswith(", so the call is blocked.")
    assert "nosuch" in out["permissionDecisionReason"]

    code, _ = await post(server, ask_token, payload(PRE, "make y"), host="codex")
    assert code == 404  # Codex runs `pizzabot hook codex`; only Claude Code posts here
