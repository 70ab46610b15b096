"""`pizzabot hook install HOST` against a served bot with the shipped skills: it shows the
entry, merges it into the host's settings without touching anything else there, makes an
ask token of its own, and the command it wrote asks a person and answers the host."""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import stat
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio

from tests.e2e.test_hooks import card, decide, payload
from tests.peers.server import TOKEN, ServerProcess

pytestmark = pytest.mark.asyncio(loop_scope="module")

ROOT = Path(__file__).resolve().parents[2]
PIZZABOT = str(Path(sys.executable).parent / "pizzabot")
THEIRS = {
    "permissions": {"allow": ["Bash(npm test)"]},
    "hooks": {
        "PostToolUse": [{"matcher": "Write", "hooks": [{"type": "command", "command": "fmt"}]}],
        "PreToolUse": [{"matcher": "Edit", "hooks": [{"type": "command", "command": "lint"}]}],
    },
}


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def server(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[ServerProcess]:
    root = tmp_path_factory.mktemp("install")
    proc = ServerProcess(data_dir=root / "data", skills_dir=ROOT / "manifests" / "skills")
    await proc.start()
    try:
        yield proc
    finally:
        proc.stop()


def install(
    server: ServerProcess, home: Path, project: Path, *args: str
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HOME": str(home), "PIZZABOT_URL": server.url}
    env["PIZZABOT_API_TOKEN"] = TOKEN  # the owner makes the hook's token
    return subprocess.run(
        [PIZZABOT, "hook", "install", *args],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=60,
    )


def ours(hooks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [h for h in hooks if "hook claude-code" in json.dumps(h)]


async def test_install_merges_the_entry_and_its_command_asks_a_person(
    server: ServerProcess, tmp_path: Path
) -> None:
    home, project = tmp_path / "home", tmp_path / "shop"
    (project / ".claude").mkdir(parents=True)
    home.mkdir()
    settings = project / ".claude" / "settings.json"
    settings.write_text(json.dumps(THEIRS))
    settings.chmod(0o640)

    done = install(server, home, project, "claude-code", "--yes")
    assert done.returncode == 0, done.stderr
    shown, _, written = done.stdout.partition("written: ")
    assert f"hooks.PreToolUse in {settings}" in shown and '"matcher": "Bash"' in shown
    assert written.startswith(str(settings))

    merged = json.loads(settings.read_text())
    assert stat.S_IMODE(settings.stat().st_mode) == 0o640  # its mode kept
    assert merged["permissions"] == THEIRS["permissions"]
    assert merged["hooks"]["PostToolUse"] == THEIRS["hooks"]["PostToolUse"]
    pre = merged["hooks"]["PreToolUse"]
    assert pre[0] == THEIRS["hooks"]["PreToolUse"][0] and len(ours(pre)) == 1
    entry = ours(pre)[0]["hooks"][0]
    assert entry["type"] == "command" and entry["timeout"] == 600
    token_file = home / ".config" / "pizzabot" / "hooks" / "claude-code.token"
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    assert token_file.read_text().strip() not in settings.read_text()  # the secret stays out

    async with server.client() as c:
        tokens = (await c.get("/api/tokens")).json()["items"]
    assert [(t["name"], t["scope"]) for t in tokens] == [("claude-code-hook", "ask")]

    # The command as Claude Code runs it: its settings' line, no token in the environment.
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIZZABOT_")}
    proc = await asyncio.create_subprocess_exec(
        *shlex.split(entry["command"]),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        env={**env, "HOME": str(home)},
    )
    body = payload("claude-code-pre-tool-use", "npm publish")
    stdin = json.dumps(body).encode()
    waiting = asyncio.ensure_future(proc.communicate(stdin))
    item = await card(server, "Claude Code: npm publish")
    assert item["requested_by"] == "token:claude-code-hook"
    await decide(server, item["id"], decision="approve")
    out, _ = await asyncio.wait_for(waiting, 60)
    said = json.loads(out)["hookSpecificOutput"]
    assert said["permissionDecision"] == "allow" and proc.returncode == 0

    # Installed again: still one entry of ours, theirs untouched.
    again = install(server, home, project, "claude-code", "--yes")
    assert again.returncode == 0, again.stderr
    pre = json.loads(settings.read_text())["hooks"]["PreToolUse"]
    assert len(ours(pre)) == 1 and pre[0] == THEIRS["hooks"]["PreToolUse"][0]
    async with server.client() as c:
        tokens = (await c.get("/api/tokens")).json()["items"]
    active = [t["id"] for t in tokens if t["revoked_at"] is None]
    assert len(tokens) == 2 and len(active) == 1  # the old one revoked
    assert f"(token {active[0]}, claude-code-hook, scope ask;" in again.stdout


async def test_install_writes_each_hosts_own_format(server: ServerProcess, tmp_path: Path) -> None:
    home, project = tmp_path / "home", tmp_path / "shop"
    home.mkdir()
    project.mkdir()
    for host in ("codex", "gemini", "cursor", "copilot"):
        done = install(server, home, project, host, "--yes", "--timeout", "900")
        assert done.returncode == 0, done.stderr
    codex = json.loads((project / ".codex" / "hooks.json").read_text())
    assert codex["hooks"]["PermissionRequest"][0]["matcher"] == "Bash"
    gemini = json.loads((project / ".gemini" / "settings.json").read_text())
    hook = gemini["hooks"]["BeforeTool"][0]
    assert hook["matcher"] == "run_shell_command" and hook["hooks"][0]["timeout"] == 900_000
    cursor = json.loads((project / ".cursor" / "hooks.json").read_text())
    assert (
        cursor["version"] == 1
        and "hook cursor" in cursor["hooks"]["beforeShellExecution"][0]["command"]
    )
    copilot = json.loads((project / ".github" / "hooks" / "pizzabot.json").read_text())
    pre = copilot["hooks"]["preToolUse"][0]
    assert copilot["version"] == 1 and pre["timeoutSec"] == 900 and "hook copilot" in pre["bash"]


async def test_install_refuses_what_it_cannot_do_and_writes_nothing(
    server: ServerProcess, tmp_path: Path
) -> None:
    home, project = tmp_path / "home", tmp_path / "shop"
    home.mkdir()
    (project / ".claude").mkdir(parents=True)
    unconfirmed = install(server, home, project, "claude-code")
    assert unconfirmed.returncode == 1
    assert unconfirmed.stderr.strip() == (
        "error: not written: pass --yes to write without a terminal to confirm."
    )
    assert not (project / ".claude" / "settings.json").exists()

    (project / ".claude" / "settings.json").write_text("{oops")
    broken = install(server, home, project, "claude-code", "--yes")
    assert broken.returncode == 2 and "is not JSON" in broken.stderr
    assert (project / ".claude" / "settings.json").read_text() == "{oops"

    user = install(server, home, project, "copilot", "--scope", "user", "--yes")
    assert user.returncode == 2 and "--scope project" in user.stderr
    unknown = install(server, home, project, "vim", "--yes")
    assert unknown.returncode == 2 and "no such host 'vim'" in unknown.stderr


async def test_install_http_posts_claude_codes_input_with_the_token_from_its_variable(
    server: ServerProcess, tmp_path: Path
) -> None:
    home, project = tmp_path / "home", tmp_path / "shop"
    home.mkdir()
    project.mkdir()
    done = install(server, home, project, "claude-code", "--http", "--timeout", "120", "--yes")
    assert done.returncode == 0, done.stderr
    token_file = home / ".config" / "pizzabot" / "hooks" / "claude-code.token"
    assert f'export PIZZABOT_HOOK_TOKEN="$(cat {token_file})"' in done.stdout
    settings = json.loads((project / ".claude" / "settings.json").read_text())
    (entry,) = settings["hooks"]["PermissionRequest"]
    hook = entry["hooks"][0]
    assert hook["type"] == "http" and hook["allowedEnvVars"] == ["PIZZABOT_HOOK_TOKEN"]
    assert hook["url"] == f"{server.url}/api/hooks/claude-code?timeout=120"
    assert token_file.read_text().strip() not in json.dumps(settings)

    # What Claude Code does with the entry: the header's variable filled in, the input posted.
    header = hook["headers"]["Authorization"].replace(
        "$PIZZABOT_HOOK_TOKEN", token_file.read_text().strip()
    )
    body = payload("claude-code-permission-request", "npm publish --tag next")
    async with httpx.AsyncClient(timeout=90) as c:
        posting = asyncio.ensure_future(
            c.post(hook["url"], json=body, headers={"Authorization": header})
        )
        item = await card(server, "Claude Code: npm publish --tag next")
        await decide(server, item["id"], decision="approve")
        r = await posting
    decision = r.json()["hookSpecificOutput"]["decision"]
    assert r.status_code == 200 and decision == {"behavior": "allow"}

    other = install(server, home, project, "codex", "--http", "--yes")
    assert other.returncode == 2 and "only claude-code posts its hooks" in other.stderr
