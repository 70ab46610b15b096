"""The local peers the suite needs, and the one rule for a missing one: the test fails.

CI installs every peer below (`.ci/install-system-packages`), so a peer missing on a machine
means the machine is not set up, not that the tests do not apply there; a skip would let a
whole channel go untested while the run reports green. The rule is the same for each peer:
a test marked with the peer's name (`@pytest.mark.mail`, `postgres`, `browser`; see
`conftest.py`), or a fixture that starts the peer, calls `require` and fails saying what is
missing and how to install it.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

DOVECOT = "/usr/sbin/dovecot"
CHROMIUM = "/usr/bin/chromium"
PG_ADDRESS = ("127.0.0.1", 5432)
#: The example skills' MCP servers from npm (`.ci/install-mcp-servers` installs them here).
NPM_BIN = Path(__file__).resolve().parents[2] / ".ci" / "mcp-servers" / "node_modules" / ".bin"
#: The example skills' MCP servers from PyPI on the 1.x MCP SDK, in a venv of their own (also
#: `.ci/install-mcp-servers`).
PYPI_BIN = Path(__file__).resolve().parents[2] / ".ci" / "mcp-servers" / "venv" / "bin"
#: The MCP conformance suite and its Node 22, from npm (`.ci/install-conformance`).
CONFORMANCE_DIR = Path(__file__).resolve().parents[2] / ".ci" / "conformance" / "node_modules"
NODE22 = str(CONFORMANCE_DIR / ".bin" / "node")
CONFORMANCE = str(CONFORMANCE_DIR / "@modelcontextprotocol" / "conformance" / "dist" / "index.js")


def _executable(path: str) -> Callable[[], bool]:
    return lambda: os.access(path, os.X_OK)


def _listening(address: tuple[str, int]) -> Callable[[], bool]:
    def check() -> bool:
        try:
            with socket.create_connection(address, timeout=1):
                return True
        except OSError:
            return False

    return check


@dataclass(frozen=True)
class Peer:
    """A program the tests talk to, and how to tell it is there."""

    what: str
    present: Callable[[], bool]


#: Keyed by the pytest marker that says a test needs the peer.
PEERS: dict[str, Peer] = {
    "mail": Peer(f"dovecot ({DOVECOT})", _executable(DOVECOT)),
    "browser": Peer(f"Chromium ({CHROMIUM})", _executable(CHROMIUM)),
    "postgres": Peer("PostgreSQL on {}:{}".format(*PG_ADDRESS), _listening(PG_ADDRESS)),
    "npm": Peer(
        f"the example skills' MCP servers in {NPM_BIN.parents[1]} (.ci/install-mcp-servers)",
        lambda: os.access(NPM_BIN / "mcp-server-filesystem", os.X_OK),
    ),
    "pypi": Peer(
        f"the example skills' MCP servers in {PYPI_BIN.parent} (.ci/install-mcp-servers)",
        lambda: os.access(PYPI_BIN / "mcp-email-server", os.X_OK),
    ),
    "conformance": Peer(
        "the MCP conformance suite (.ci/conformance)",
        lambda: os.access(NODE22, os.X_OK) and os.path.isfile(CONFORMANCE),
    ),
}


def require(marker: str) -> None:
    """Fail the current test unless the peer named by `marker` is there."""
    peer = PEERS[marker]
    if not peer.present():
        pytest.fail(
            f"{peer.what} is missing: these tests need it and CI installs it; "
            "run .ci/install-system-packages (it installs dovecot and Chromium and "
            "starts PostgreSQL), .ci/install-conformance (the MCP conformance suite) and "
            ".ci/install-mcp-servers (the example skills' npm and PyPI MCP servers)",
            pytrace=False,
        )
