"""The MCP conformance suite's client scenarios against Pizza Bot's MCP client.

The suite (`@modelcontextprotocol/conformance`, pinned, on Node 22 from the npm registry;
`.ci/install-conformance`) starts its test server for each scenario and runs
`tests/peers/conformance_client.py`: a skill whose one MCP server is the suite's, connected
by the hub a run uses (OAuth, elicitation, clientInfo and all), every tool listed and called.
Scenarios it does not pass, and why, are in tests/fixtures/conformance-baseline.yml (and
docs/mcp.md); the suite fails a run where a listed one starts passing, so the list stays true.

Scenarios run one at a time: each starts a Python process, and many at once on two cores
make the suite's time-outs, not the client, decide.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.peers.required import CONFORMANCE, NODE22
from tests.peers.server import BYTECODE

pytestmark = pytest.mark.conformance

ROOT = Path(__file__).resolve().parents[2]
CLIENT = ROOT / "tests" / "peers" / "conformance_client.py"
BASELINE = ROOT / "tests" / "fixtures" / "conformance-baseline.yml"

#: Every client scenario of the pinned suite (a new release's new ones fail the last test).
SCENARIOS = [
    "initialize",
    "tools_call",
    "elicitation-sep1034-client-defaults",
    "sse-retry",
    "auth/metadata-default",
    "auth/metadata-var1",
    "auth/metadata-var2",
    "auth/metadata-var3",
    "auth/basic-cimd",
    "auth/scope-from-www-authenticate",
    "auth/scope-from-scopes-supported",
    "auth/scope-omitted-when-undefined",
    "auth/scope-step-up",
    "auth/scope-retry-limit",
    "auth/token-endpoint-auth-basic",
    "auth/token-endpoint-auth-post",
    "auth/token-endpoint-auth-none",
    "auth/pre-registration",
    "auth/2025-03-26-oauth-metadata-backcompat",
    "auth/2025-03-26-oauth-endpoint-fallback",
    "auth/resource-mismatch",
    "auth/offline-access-scope",
    "auth/offline-access-not-supported",
    "auth/client-credentials-jwt",
    "auth/client-credentials-basic",
    "auth/cross-app-access-complete-flow",
]


def suite(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PATH": f"{Path(NODE22).parent}:{os.environ['PATH']}",  # Node 22 first
        "PYTHONDONTWRITEBYTECODE": "",
        "PYTHONPYCACHEPREFIX": str(BYTECODE),
        "NO_COLOR": "1",
    }
    return subprocess.run(
        [NODE22, CONFORMANCE, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=BYTECODE.parent,
    )


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_client_scenario(scenario: str, tmp_path: Path) -> None:
    done = suite(
        "client",
        "--command",
        f"{sys.executable} {CLIENT}",
        "--scenario",
        scenario,
        "--timeout",
        "60000",
        "--expected-failures",
        str(BASELINE),
        "--output-dir",
        str(tmp_path),
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-6000:]


def test_every_client_scenario_of_the_suite_is_run() -> None:
    listed = suite("list", "--client", timeout=60)
    assert listed.returncode == 0, listed.stderr
    names = [
        line.strip()[2:].split(" ")[0]
        for line in listed.stdout.splitlines()
        if line.strip().startswith("- ")
    ]
    assert sorted(names) == sorted(SCENARIOS)
