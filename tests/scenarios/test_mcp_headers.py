"""A hosted MCP server that wants a token: the skill's `headers` are sent, with the secret
taken from the environment (`${VAR}`) and never logged, and a refusal is said plainly on the
run ("127.0.0.1 answered 401 Unauthorized: needs a token"), not as a JSON-RPC error number.
The server is the "crm" test server over streamable HTTP behind a bearer-token check, in its
own process."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from pizzabot.agent.errors import RunError
from pizzabot.agent.mcp_http import resolve_headers
from pizzabot.agent.model import RunStatus
from pizzabot.agent.policy import Principal
from pizzabot.agent.skills import Skill
from pizzabot.agent.testing.scripts import Reply, ToolCall, turns
from pizzabot.agent.tools_mcp import ToolHub
from tests.peers import mcp_tools
from tests.peers.inproc import InProcess

SECRET = "s3cret-token-value"
BEARER = {"Authorization": "Bearer ${CRM_TOKEN}"}


@pytest.fixture
async def hosted() -> AsyncIterator[str]:
    async with mcp_tools.serve_http(token=SECRET) as url:
        yield url


def skill(url: str, headers: dict[str, str] | None = None) -> Skill:
    server: dict[str, Any] = {"url": url, **({"headers": headers} if headers else {})}
    return Skill.model_validate(
        {
            "name": "crm",
            "instructions": "Look people up.",
            "model": "openai/none",
            "mcp_servers": {"hosted": server},
            "tools": {"hosted.lookup": "auto"},
        }
    )


async def test_the_headers_are_sent_with_the_secret_from_the_environment(
    hosted: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    hub = ToolHub(env={"CRM_TOKEN": SECRET})
    try:
        outcome = await hub.call(skill(hosted, BEARER), "hosted", "lookup", {"query": "Ann"})
    finally:
        await hub.aclose()
    assert not outcome.is_error and "customer 'Ann'" in outcome.text
    assert SECRET not in caplog.text


@pytest.mark.parametrize(
    ("env", "headers", "said"),
    [
        ({}, None, "127.0.0.1 answered 401 Unauthorized: needs a token"),
        (
            {"CRM_TOKEN": "wrong"},
            BEARER,
            "127.0.0.1 answered 401 Unauthorized: the token was refused",
        ),
        (
            {},
            BEARER,
            "header Authorization needs the environment variable CRM_TOKEN, which is not set",
        ),
    ],
    ids=["no-token", "wrong-token", "unset-variable"],
)
async def test_a_refusal_is_said_plainly(
    hosted: str,
    env: dict[str, str],
    headers: dict[str, str] | None,
    said: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    hub = ToolHub(env=env)
    try:
        with pytest.raises(RunError) as refused:
            await hub.list_tools(skill(hosted, headers))
    finally:
        await hub.aclose()
    assert str(refused.value) == f"MCP server 'hosted': {said}"
    assert "-32603" not in str(refused.value)
    assert "wrong" not in caplog.text  # a token that was sent is not logged either


async def test_the_run_says_which_server_refused_it_and_why(hosted: str, tmp_path: Path) -> None:
    script = turns(Reply(tool_calls=[ToolCall("hosted__lookup", {"query": "Ann"})]), Reply("ok"))
    over = {"mcp_servers": {"hosted": {"url": hosted}}, "tools": {"hosted.lookup": "auto"}}
    async with InProcess(tmp_path, script, skill=over) as h:
        run = await h.runs.start("test", "look Ann up", by=Principal.owner("api"))
        failed = await h.wait(run.id, {RunStatus.FAILED})
    assert failed.error is not None
    assert "127.0.0.1 answered 401 Unauthorized: needs a token" in failed.error


def test_a_header_cannot_smuggle_a_line_break_from_the_file_or_the_environment() -> None:
    with pytest.raises(ValueError, match="not an HTTP header name"):
        skill("https://crm.example/mcp", {"Bad Name": "x"})
    with pytest.raises(ValueError, match="line break or control character"):
        skill("https://crm.example/mcp", {"X-Team": "a\r\nX-Admin: yes"})
    with pytest.raises(RunError, match="holds a line break") as refused:
        resolve_headers("hosted", BEARER, {"CRM_TOKEN": f"{SECRET}\r\nX-Admin: yes"})
    assert SECRET not in str(refused.value)
