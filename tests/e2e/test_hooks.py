"""`pizzabot hook HOST` as each coding agent runs it: its real hook input on stdin, against a
served bot with the shipped skills, and the exact answer the host reads on stdout (or, for
Gemini CLI's block, on stderr with exit 2) — for approve, edit, reject, a server that is
down, no decision in time, and a read-only command the rules let through."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from tests.peers.server import TOKEN, ServerProcess, free_port
from tests.waiting import eventually

pytestmark = pytest.mark.asyncio(loop_scope="module")

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "hooks"
BIN = Path(sys.executable).parent
CWD = str(ROOT)
DENIED_IN_TIME = (
    "No one decided in Pizza Bot within 5 s, so the call was not run; do not retry it unless asked."
)

Out = tuple[int, Any, str]  # exit code, stdout as JSON (None: empty), stderr


def claude_pre(allow: bool, reason: str, updated: dict[str, Any] | None = None) -> Out:
    out: dict[str, Any] = {
        "hookEventName": "PreToolUse",
        "permissionDecision": "allow" if allow else "deny",
        "permissionDecisionReason": reason,
    }
    if updated is not None:
        out["updatedInput"] = updated
    return 0, {"hookSpecificOutput": out}, ""


def claude_permission(allow: bool, reason: str, updated: dict[str, Any] | None = None) -> Out:
    decision: dict[str, Any] = {"behavior": "allow" if allow else "deny"}
    if updated is not None:
        decision["updatedInput"] = updated
    if not allow:
        decision["message"] = reason
    return (
        0,
        {"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": decision}},
        "",
    )


def codex(allow: bool, reason: str, updated: dict[str, Any] | None = None) -> Out:
    decision: dict[str, Any] = {"behavior": "allow" if allow else "deny"}
    if not allow:
        decision["message"] = reason
    return (
        0,
        {"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": decision}},
        "",
    )


def gemini(allow: bool, reason: str, updated: dict[str, Any] | None = None) -> Out:
    if not allow:
        return 2, None, reason + "\n"
    out: dict[str, Any] = {"decision": "allow", "reason": reason}
    if updated is not None:
        out["hookSpecificOutput"] = {"tool_input": updated}
    return 0, out, ""


def cursor(allow: bool, reason: str, updated: dict[str, Any] | None = None) -> Out:
    out = {
        "permission": "allow" if allow else "deny",
        "user_message": reason,
        "agent_message": reason,
    }
    return 0, out, ""


def copilot(allow: bool, reason: str, updated: dict[str, Any] | None = None) -> Out:
    out: dict[str, Any] = {
        "permissionDecision": "allow" if allow else "deny",
        "permissionDecisionReason": reason,
    }
    if updated is not None:
        out["modifiedArgs"] = updated
    return 0, out, ""


#: fixture, host, card label, the host's answer, whether it runs an edited call
CASES: list[tuple[str, str, str, Callable[..., Out], bool]] = [
    ("claude-code-pre-tool-use", "claude-code", "Claude Code", claude_pre, True),
    ("claude-code-permission-request", "claude-code", "Claude Code", claude_permission, True),
    ("codex-permission-request", "codex", "Codex", codex, False),
    ("gemini-before-tool", "gemini", "Gemini CLI", gemini, True),
    ("cursor-before-shell-execution", "cursor", "Cursor", cursor, False),
    ("copilot-pre-tool-use", "copilot", "Copilot CLI", copilot, True),
]
IDS = [c[0] for c in CASES]


def _fill(value: Any, command: str) -> Any:
    if isinstance(value, dict):
        return {
            k: json.dumps(_fill(json.loads(v), command)) if k == "toolArgs" else _fill(v, command)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_fill(v, command) for v in value]
    if isinstance(value, str):
        return command if value == "COMMAND" else CWD if value == "CWD" else value
    return value


def payload(fixture: str, command: str) -> dict[str, Any]:
    return _fill(json.loads((FIXTURES / f"{fixture}.json").read_text()), command)


def tool_input(fixture: str, command: str) -> dict[str, Any]:
    """What the host's tool would run with: the input a rewrite hands back, changed."""
    p = payload(fixture, command)
    if "toolArgs" in p:
        return json.loads(p["toolArgs"])
    return p.get("tool_input") or {"command": p["command"]}


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def server(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[ServerProcess]:
    root = tmp_path_factory.mktemp("hooks")
    proc = ServerProcess(
        data_dir=root / "data",
        skills_dir=ROOT / "manifests" / "skills",  # what `make serve` loads
        env={"PIZZABOT_TIMERS_INTERVAL": "0.2", "PIZZABOT_POLL_INTERVAL": "0.2"},
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
        assert r.status_code in (200, 201), r.text
        return str(r.json()["token"])


async def hook(
    server: ServerProcess, host: str, body: dict[str, Any], token: str, *more: str, **env: str
) -> asyncio.subprocess.Process:
    proc = await asyncio.create_subprocess_exec(
        str(BIN / "pizzabot"),
        "hook",
        host,
        *more,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={
            **os.environ,
            "PIZZABOT_URL": server.url,
            "PIZZABOT_API_TOKEN": token,
            "PIZZABOT_DATA_DIR": str(server.data_dir / "elsewhere"),
            **env,
        },
    )
    assert proc.stdin is not None
    proc.stdin.write(json.dumps(body).encode())
    proc.stdin.close()
    return proc


async def answer(proc: asyncio.subprocess.Process) -> Out:
    out, err = await asyncio.wait_for(proc.communicate(), 90)
    assert proc.returncode is not None
    text = out.decode()
    return proc.returncode, json.loads(text) if text.strip() else None, err.decode()


async def card(server: ServerProcess, title: str) -> dict[str, Any]:
    async with server.client() as c:

        async def find() -> dict[str, Any] | None:
            items = (await c.get("/api/inbox", params={"box": "action"})).json()["items"]
            return next((i for i in items if i["title"] == title), None)

        return await eventually(find, what=f"the card {title!r}", context=server.log)


async def decide(server: ServerProcess, item_id: str, **body: Any) -> None:
    async with server.client() as c:
        r = await c.post(f"/api/items/{item_id}/decision", json=body)
        assert r.status_code == 200, r.text


@pytest.mark.parametrize(("fixture", "host", "label", "expect", "rewrites"), CASES, ids=IDS)
async def test_an_approval_allows_the_call(
    server: ServerProcess,
    ask_token: str,
    fixture: str,
    host: str,
    label: str,
    expect: Callable[..., Out],
    rewrites: bool,
) -> None:
    command = f"rm -rf build/{fixture}"
    proc = await hook(server, host, payload(fixture, command), ask_token, "--timeout", "120")
    item = await card(server, f"{label}: {command}")
    assert item["tool"] == "shell.run" and item["args"]["command"] == command
    assert item["requested_by"] == "token:laptop-hook"
    assert f"Working directory: {CWD}" in item["body"] and "    " + command in item["body"]
    assert "after that the call is denied" in item["body"]
    await decide(server, item["id"], decision="approve")
    assert await answer(proc) == expect(True, "Approved by owner via api in Pizza Bot")


@pytest.mark.parametrize(("fixture", "host", "label", "expect", "rewrites"), CASES, ids=IDS)
async def test_an_edit_runs_the_persons_command_where_the_host_can(
    server: ServerProcess,
    ask_token: str,
    fixture: str,
    host: str,
    label: str,
    expect: Callable[..., Out],
    rewrites: bool,
) -> None:
    command = f"rm -rf dist/{fixture}"
    proc = await hook(server, host, payload(fixture, command), ask_token, "--timeout", "120")
    item = await card(server, f"{label}: {command}")
    assert item["schema"]["required"] == ["command"]  # the card has an edit form
    edited = {**item["args"], "command": f"rm -rf dist/{fixture}/tmp"}
    await decide(server, item["id"], decision="edit", args=edited)
    if rewrites:
        assert edited == tool_input(fixture, f"rm -rf dist/{fixture}/tmp")  # every field kept
        assert await answer(proc) == expect(True, "Edited by owner via api in Pizza Bot", edited)
    else:
        reason = (
            f"Edited by owner via api in Pizza Bot, changed to: rm -rf dist/{fixture}/tmp — "
            "run that instead if it is still needed."
        )
        assert await answer(proc) == expect(False, reason)


@pytest.mark.parametrize(("fixture", "host", "label", "expect", "rewrites"), CASES, ids=IDS)
async def test_a_rejection_denies_with_the_reason(
    server: ServerProcess,
    ask_token: str,
    fixture: str,
    host: str,
    label: str,
    expect: Callable[..., Out],
    rewrites: bool,
) -> None:
    command = f"git push --force origin {fixture}"
    proc = await hook(server, host, payload(fixture, command), ask_token, "--timeout", "120")
    item = await card(server, f"{label}: {command}")
    await decide(server, item["id"], decision="reject", reason="never force-push")
    assert await answer(proc) == expect(False, "Rejected by owner via api: never force-push")


async def test_every_host_is_denied_when_pizza_bot_is_down_or_no_one_decides(
    server: ServerProcess, ask_token: str
) -> None:
    down = f"http://127.0.0.1:{free_port()}"
    downs = [
        await hook(server, host, payload(f, "make deploy"), ask_token, PIZZABOT_URL=down)
        for f, host, *_ in CASES
    ]
    # --timeout 10: the host gives the hook 10 s, so it answers after 5.
    lates = [
        await hook(server, host, payload(f, f"make release-{f}"), ask_token, "--timeout", "10")
        for f, host, *_ in CASES
    ]
    for (fixture, _, label, _expect, _), proc in zip(CASES, downs, strict=True):
        code, out, err = await answer(proc)
        reason = (out or {}).get("hookSpecificOutput", out or {})
        text = json.dumps(reason) + err
        assert "Pizza Bot is not reachable at " + down in text and "blocked" in text, fixture
        assert code == (2 if label == "Gemini CLI" else 0)
    for (fixture, _, label, expect, _), proc in zip(CASES, lates, strict=True):
        assert await answer(proc) == expect(False, DENIED_IN_TIME), fixture
        item = await card_of(server, f"{label}: make release-{fixture}")
        assert item["status"] == "expired"  # the card says it is over, too


async def card_of(server: ServerProcess, title: str) -> dict[str, Any]:
    async with server.client() as c:

        async def find() -> dict[str, Any] | None:
            items = (await c.get("/api/inbox", params={"box": "action", "all": "true"})).json()
            found = [i for i in items["items"] if i["title"] == title]
            return found[0] if found and found[0]["status"] != "pending" else None

        return await eventually(find, what=f"{title!r} decided", context=server.log)


@pytest.mark.parametrize(("fixture", "host", "label", "expect", "rewrites"), CASES, ids=IDS)
async def test_a_read_only_command_runs_without_asking(
    server: ServerProcess,
    ask_token: str,
    fixture: str,
    host: str,
    label: str,
    expect: Callable[..., Out],
    rewrites: bool,
) -> None:
    proc = await hook(server, host, payload(fixture, "git status --short"), ask_token)
    code, out, err = await answer(proc)
    assert (code, out, err) == expect(
        True, "Allowed by rule 4 of shell.run in Pizza Bot (no one was asked)"
    )


async def test_unreadable_input_and_the_servers_own_token_are_denied(
    server: ServerProcess, tmp_path: Path
) -> None:
    garbled = await asyncio.create_subprocess_exec(
        str(BIN / "pizzabot"),
        "hook",
        "claude-code",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, _ = await garbled.communicate(b"{not json")
    said = json.loads(out)["hookSpecificOutput"]
    assert said["permissionDecision"] == "deny"
    assert said["permissionDecisionReason"].startswith(
        "Pizza Bot could not read Claude Code's hook"
    )

    # Without a token of its own the hook would ask with the server's, which can decide.
    env = {k: v for k, v in os.environ.items() if k != "PIZZABOT_API_TOKEN"}
    (tmp_path / "api-token").write_text(TOKEN)  # as the server keeps it in its data folder
    owner = await asyncio.create_subprocess_exec(
        str(BIN / "pizzabot"),
        "hook",
        "copilot",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**env, "PIZZABOT_URL": server.url, "PIZZABOT_DATA_DIR": str(tmp_path)},
    )
    body = json.dumps(payload("copilot-pre-tool-use", "make deploy")).encode()
    out, _ = await owner.communicate(body)
    said = json.loads(out)
    assert said["permissionDecision"] == "deny"
    assert "pizzabot hook install copilot" in said["permissionDecisionReason"]


async def test_a_file_edit_shows_its_diff_and_reads_as_a_request(
    server: ServerProcess, ask_token: str, tmp_path: Path
) -> None:
    shop = tmp_path / "shop"
    (shop / ".git").mkdir(parents=True)
    (shop / ".git" / "HEAD").write_text("ref: refs/heads/price-rise\n")
    (shop / "src").mkdir()
    body = payload("claude-code-pre-tool-use", "unused")
    body |= {
        "cwd": str(shop / "src"),
        "tool_name": "Edit",
        "tool_input": {
            "file_path": f"{shop}/src/prices.py",
            "old_string": "PRICE = 10\n",
            "new_string": "PRICE = 12\n",
            "replace_all": False,
        },
    }
    proc = await hook(server, "claude-code", body, ask_token, "--timeout", "120")
    item = await card(server, f"Claude Code: edit {shop}/src/prices.py")
    assert item["tool"] == "Edit" and item["server"] is None and item["requested"] is True
    assert "    -PRICE = 10\n    +PRICE = 12" in item["body"]
    assert "session 9b1c2f4e-7a1d-4a51-9d0c-2f4c6b8e1a37" in item["body"]
    assert f"Working directory: {shop}/src\nRepository: {shop}, branch price-rise" in item["body"]

    shown = await asyncio.create_subprocess_exec(
        str(BIN / "pizzabot"),
        "item",
        item["id"],
        "--url",
        server.url,
        "--token",
        TOKEN,
        stdout=asyncio.subprocess.PIPE,
        env={**os.environ, "COLUMNS": "200"},
    )
    out, _ = await shown.communicate()
    text = out.decode()
    assert "The request" in text and "What the agent says" in text and "+PRICE = 12" in text
    assert "The model's last message" not in text and "on server" not in text

    runs = await asyncio.create_subprocess_exec(
        str(BIN / "pizzabot"),
        "runs",
        "--url",
        server.url,
        "--token",
        TOKEN,
        stdout=asyncio.subprocess.PIPE,
        env={**os.environ, "COLUMNS": "250"},
    )
    listed, _ = await runs.communicate()
    assert "Claude Code: edit" in listed.decode()  # the request's run, titled by it

    await decide(server, item["id"], decision="reject", reason="prices stay")
    assert await answer(proc) == claude_pre(False, "Rejected by owner via api: prices stay")


async def test_a_command_the_rules_forbid_is_denied_without_asking(
    server: ServerProcess, ask_token: str
) -> None:
    body = payload("claude-code-pre-tool-use", "sudo rm -rf /")
    proc = await hook(server, "claude-code", body, ask_token)
    assert await answer(proc) == claude_pre(
        False, "Denied by rule 1 of shell.run in Pizza Bot: never this"
    )


async def test_a_refused_request_is_denied_in_the_servers_words(
    server: ServerProcess, ask_token: str
) -> None:
    body = payload("copilot-pre-tool-use", "make deploy")
    proc = await hook(server, "copilot", body, ask_token, "--skill", "nosuch")
    code, out, err = await answer(proc)
    reason = out["permissionDecisionReason"]
    assert (code, out["permissionDecision"], err) == (0, "deny", "")
    assert reason.startswith("Pizza Bot refused the request (422: ")
    assert "skill: no skill named 'nosuch'" in reason and "{'" not in reason
    assert reason.endswith("so the call is blocked.")


async def test_deferred_the_call_waits_for_its_session_to_resume(
    server: ServerProcess, ask_token: str
) -> None:
    # Headless Claude Code (-p) holds a deferred call; resumed, it runs the hook again.
    body = payload("claude-code-pre-tool-use", "terraform apply")
    first = await hook(server, "claude-code", body, ask_token, "--timeout", "10", "--defer")
    code, out, err = await answer(first)
    said = out["hookSpecificOutput"]
    assert (code, said["permissionDecision"], err) == (0, "defer", "")
    assert said["permissionDecisionReason"].endswith("resume the session to ask again.")
    item = await card(server, "Claude Code: terraform apply")  # still open
    assert item["status"] == "pending" and "then holds the call" in item["body"]

    await decide(server, item["id"], decision="approve")
    again = await hook(server, "claude-code", body, ask_token, "--timeout", "10", "--defer")
    assert await answer(again) == claude_pre(True, "Approved by owner via api in Pizza Bot")
    async with server.client() as c:
        items = (await c.get("/api/inbox", params={"all": "true"})).json()["items"]
    assert [i["title"] for i in items].count("Claude Code: terraform apply") == 1
