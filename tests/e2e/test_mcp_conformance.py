"""`/mcp` against the official MCP conformance suite (`@modelcontextprotocol/conformance`,
run on the Node 22 that `.ci/install-conformance` installs from npm), for every server
scenario that applies to a server that offers only tools.

The suite sends no `Authorization` header, so it talks to a served bot through a loopback
proxy that adds the API token (`tests.peers.bearer_proxy`) and changes nothing else: the
DNS-rebinding scenario's `Host` and `Origin` reach the server as the suite sent them.
Which scenarios do not apply, and why, is said in docs/mcp.md; a scenario in neither list
fails the test, so a new suite release is read before it is trusted."""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from tests.peers.bearer_proxy import BearerProxy
from tests.peers.required import CONFORMANCE, NODE22
from tests.peers.server import TOKEN, ServerProcess

pytestmark = [pytest.mark.conformance, pytest.mark.asyncio(loop_scope="module")]

#: Scenarios of a tools-only server: run, and every check must succeed.
APPLIES = [
    "server-initialize",
    "ping",
    "tools-list",
    "resources-list",  # declared by the SDK's server, always empty
    "prompts-list",  # likewise
    "dns-rebinding-protection",
]
#: Scenarios that need what this server does not offer (docs/mcp.md says why).
DOES_NOT_APPLY = {
    # The suite's own test tools (test_simple_text, test_image_content, ...).
    "tools-call-simple-text",
    "tools-call-image",
    "tools-call-audio",
    "tools-call-embedded-resource",
    "tools-call-mixed-content",
    "tools-call-with-logging",
    "tools-call-error",
    "tools-call-with-progress",
    "tools-call-sampling",
    "tools-call-elicitation",
    "elicitation-sep1034-defaults",
    "elicitation-sep1330-enums",
    "json-schema-2020-12",
    # Capabilities the server does not declare.
    "logging-set-level",
    "completion-complete",
    # The suite's resources and prompts.
    "resources-read-text",
    "resources-read-binary",
    "resources-templates-read",
    "resources-subscribe",
    "resources-unsubscribe",
    "prompts-get-simple",
    "prompts-get-with-args",
    "prompts-get-embedded-resource",
    "prompts-get-with-image",
    # Sessions and their SSE streams: /mcp is stateless.
    "server-sse-polling",
    "server-sse-multiple-streams",
}


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def mcp_url(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[str]:
    root: Path = tmp_path_factory.mktemp("conformance")
    skills = root / "skills"
    skills.mkdir()
    (skills / "inbox.yaml").write_text("name: inbox\ndescription: requests from agents\n")
    server = ServerProcess(
        data_dir=root / "data", skills_dir=skills, env={"PIZZABOT_MCP_SKILL": "inbox"}
    )
    await server.start()
    try:
        async with BearerProxy(server.port, TOKEN) as proxy:
            yield f"http://127.0.0.1:{proxy.port}/mcp"
    finally:
        server.stop()


async def _suite(*args: str) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        NODE22,
        CONFORMANCE,
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    out, _ = await asyncio.wait_for(proc.communicate(), 120)
    return proc.returncode or 0, out.decode(errors="replace")


def _checks(out_dir: Path) -> list[dict[str, Any]]:
    found = sorted(out_dir.glob("*/checks.json"))
    assert len(found) == 1, found
    checks: list[dict[str, Any]] = json.loads(found[0].read_text())
    return checks


async def test_every_server_scenario_is_known_to_apply_or_not() -> None:
    code, listing = await _suite("list", "--server")
    names = {
        line.strip()[2:].split(" ")[0]
        for line in listing.splitlines()
        if line.strip().startswith("- ")
    }
    assert code == 0, listing
    assert names - set(APPLIES) - DOES_NOT_APPLY == set(), "read the new scenarios first"
    assert set(APPLIES) <= names


@pytest.mark.parametrize("scenario", APPLIES)
async def test_the_mcp_endpoint_passes(scenario: str, mcp_url: str, tmp_path: Path) -> None:
    code, out = await _suite(
        "server", "--url", mcp_url, "--scenario", scenario, "-o", str(tmp_path)
    )
    checks = _checks(tmp_path)
    failed = [c for c in checks if c["status"] != "SUCCESS"]
    assert code == 0 and checks and not failed, out
