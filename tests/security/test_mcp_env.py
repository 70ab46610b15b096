"""stdio MCP servers start with a minimal environment, never with the server's secrets.

The server's own environment holds the Slack token and signing secret, the mail passwords
and the model key. Servers are started here through the real tool layer (`ToolHub`, as
`bot/` builds it: given the whole process environment) and asked what they got: a probe
server reports its environment as a tool result, and the built-in files server's is read
from the kernel (`/proc/<pid>/environ`).

Run as a script, this file is the probe server: `python test_mcp_env.py`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

SCRIPT = Path(__file__).resolve()

SECRETS = {
    "PIZZABOT_SLACK_BOT_TOKEN": "xoxb-secret-bot-token",
    "PIZZABOT_SLACK_SIGNING_SECRET": "secret-signing",
    "PIZZABOT_SMTP_PASSWORD": "secret-smtp",
    "PIZZABOT_IMAP_PASSWORD": "secret-imap",
    "NEW_LEAD_SECRET": "secret-webhook",
    "OPENAI_API_KEY": "sk-secret-model-key",
}


@pytest.fixture
def parent_env(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The server's environment, secrets included, as `bot/` hands it to the tool layer."""
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    # A UTF-8 LANG: a C locale would make Python set LC_CTYPE in the child by itself.
    monkeypatch.setenv("LANG", "C.UTF-8")
    monkeypatch.setenv("PROBE_TOKEN", "passed-by-name")
    monkeypatch.setenv("USER", "someone")
    monkeypatch.setenv("SHELL", "/bin/sh")
    return dict(os.environ)


def _skill(**servers: Any) -> Any:
    from pizzabot.agent.skills import Skill

    return Skill.model_validate(
        {"name": "probe", "instructions": "x", "model": "openai/x", "mcp_servers": servers}
    )


async def _reported(hub: Any, skill: Any, server: str) -> dict[str, str]:
    outcome = await hub.call(skill, server, "environment", {})
    assert not outcome.is_error, outcome.text
    env: dict[str, str] = json.loads(outcome.text)
    return env


def _leaks(env: dict[str, str]) -> list[str]:
    return [k for k, v in env.items() if any(s in v for s in SECRETS.values()) or k in SECRETS]


async def test_a_stdio_server_gets_path_home_lang_and_its_declared_env_only(
    parent_env: dict[str, str],
) -> None:
    from pizzabot.agent.tools_mcp import ToolHub

    skill = _skill(probe={"command": "python", "args": [str(SCRIPT)], "env": {"PROBE_MODE": "on"}})
    hub = ToolHub(env=parent_env)
    try:
        env = await _reported(hub, skill, "probe")
    finally:
        await hub.aclose()
    assert _leaks(env) == []
    assert env == {
        "PATH": parent_env["PATH"],
        "HOME": parent_env["HOME"],
        "LANG": "C.UTF-8",
        "PROBE_MODE": "on",
    }


async def test_pass_env_names_variables_and_inherit_env_is_an_explicit_choice(
    parent_env: dict[str, str],
) -> None:
    from pizzabot.agent.tools_mcp import ToolHub

    probe = {"command": "python", "args": [str(SCRIPT)]}
    skill = _skill(
        named={**probe, "pass_env": ["PROBE_TOKEN"]},
        everything={**probe, "inherit_env": True},
    )
    hub = ToolHub(env=parent_env)
    try:
        named = await _reported(hub, skill, "named")
        everything = await _reported(hub, skill, "everything")
    finally:
        await hub.aclose()
    assert _leaks(named) == []
    assert named == {
        "PATH": parent_env["PATH"],
        "HOME": parent_env["HOME"],
        "LANG": "C.UTF-8",
        "PROBE_TOKEN": "passed-by-name",
    }
    assert everything["PIZZABOT_SLACK_BOT_TOKEN"] == SECRETS["PIZZABOT_SLACK_BOT_TOKEN"]
    assert everything["PROBE_TOKEN"] == "passed-by-name"


async def test_the_built_in_files_server_gets_no_secrets(
    parent_env: dict[str, str], tmp_path: Path
) -> None:
    import psutil

    from pizzabot.agent.tools_mcp import ToolHub
    from pizzabot.bot.mcp_servers import folder_servers

    skill = _skill().model_copy(update={"folders": _folders(tmp_path)})
    hub = ToolHub(env=parent_env, extra_servers=folder_servers)
    try:
        listed = await hub.call(skill, "files", "list_dir", {"path": ""})
        assert not listed.is_error, listed.text
        [child] = [
            p
            for p in psutil.Process().children(recursive=True)
            if "pizzabot.tools.files" in " ".join(p.cmdline())
        ]
        env = child.environ()
    finally:
        await hub.aclose()
    assert _leaks(env) == []
    assert set(env) <= {"PATH", "HOME", "LANG"}


def _folders(tmp_path: Path) -> list[Any]:
    from pizzabot.agent.skills import Folder

    return [Folder(path=str(tmp_path))]


def _serve() -> None:
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("probe", log_level="WARNING")

    def environment() -> str:
        """This process's whole environment, as JSON."""
        return json.dumps(dict(os.environ))

    server.add_tool(environment, structured_output=False)
    server.run()


if __name__ == "__main__":
    _serve()
