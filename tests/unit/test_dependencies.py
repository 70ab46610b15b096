"""What the code imports is what its distribution declares.

A package the code imports but does not declare works only while some other dependency
happens to pull it in; an upgrade elsewhere can take it away. So every third-party import of
the server's package names a distribution pinned in pyproject.toml's `[project].dependencies`
(the client it ships beside is one of them); every import of the client (`client/`) one of
the client's own, except each framework adapter (`pizzabot/client/<extra>.py`) and the MCP
bridge (`pizzabot/client/mcp/`), which may also use their extra; the A2A face
(`channels/a2a/`, `cli/a2a.py`) may also use the server's `a2a` extra; and the bench (`bench/`),
a development tool, may also use the `bench` extra.
"""

from __future__ import annotations

import ast
import functools
import re
import sys
import tomllib
from collections.abc import Mapping
from importlib.metadata import packages_distributions
from pathlib import Path

from bench.compare.hitl import AH_PINS
from bench.compare.lgvenv import PINS

ROOT = Path(__file__).resolve().parents[2]
CLIENT = ROOT / "client"
LANGGRAPH_SIDE = ROOT / "bench" / "compare" / "langgraph_side.py"
#: Runs on Pizza Bot's Python (its client) or on the awaithumans virtualenv's (its SDK).
HITL_AGENT = ROOT / "bench" / "compare" / "hitl_agent.py"
SERVER = ("agent", "bot", "channels", "cli", "store", "tools")
#: Server modules that may also import the `a2a` extra (loaded only when A2A is used).
A2A_SIDE = (ROOT / "channels" / "a2a", ROOT / "cli" / "a2a.py")


def _name(requirement: str) -> str:
    """A requirement's distribution name, normalised as PEP 503 does."""
    match = re.match(r"[A-Za-z0-9_.-]+", requirement)
    assert match, requirement
    return re.sub(r"[-_.]+", "-", match.group(0)).lower()


def _third_party(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        else:
            continue
        for name in names:
            top = name.split(".")[0]
            if top not in sys.stdlib_module_names and top not in {"pizzabot", "bench", "tests"}:
                found.add(top)
    return found


def _project(pyproject: Path) -> tuple[set[str], dict[str, set[str]]]:
    """A distribution's runtime dependencies and its extras, by name."""
    project = tomllib.loads(pyproject.read_text())["project"]
    extras = project.get("optional-dependencies", {})
    return (
        {_name(r) for r in project["dependencies"]},
        {k: {_name(r) for r in v} for k, v in extras.items()},
    )


@functools.cache
def _installed() -> Mapping[str, list[str]]:
    """Which distribution installs which top-level module (a scan of every one: once)."""
    return packages_distributions()


def _undeclared(path: Path, declared: set[str]) -> list[str]:
    installed = _installed()
    return [
        f"{path.relative_to(ROOT)}: {module}"
        for module in sorted(_third_party(path))
        if not {_name(d) for d in installed.get(module, [module])} & declared
    ]


def test_the_server_declares_what_it_imports() -> None:
    runtime, extras = _project(ROOT / "pyproject.toml")
    assert "pizzabot-client" in runtime  # the MCP tools and the shapes it shares

    def declared(path: Path) -> set[str]:
        a2a = any(path == side or side in path.parents for side in A2A_SIDE)
        return runtime | extras["a2a"] if a2a else runtime

    undeclared = [
        line
        for part in SERVER
        for path in sorted((ROOT / part).rglob("*.py"))
        for line in _undeclared(path, declared(path))
    ]
    assert undeclared == []


def test_the_client_declares_what_it_imports() -> None:
    runtime, extras = _project(CLIENT / "pyproject.toml")
    package = CLIENT / "pizzabot" / "client"
    undeclared = []
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package)
        if rel.parts[0] == "mcp":
            extra = "mcp"
        elif not rel.name.startswith("_") and rel.stem != "__init__":
            extra = rel.stem.replace("_", "-")  # langgraph.py: the langgraph extra
        else:
            extra = None
        undeclared += _undeclared(path, runtime | extras.get(extra or "", set()))
    assert undeclared == []


def test_the_bench_declares_what_it_imports() -> None:
    runtime, extras = _project(ROOT / "pyproject.toml")
    client, _ = _project(CLIENT / "pyproject.toml")
    undeclared = []
    for path in sorted((ROOT / "bench").rglob("*.py")):
        declared = {_name(p) for p in PINS} if path == LANGGRAPH_SIDE else runtime | client
        if path == HITL_AGENT:
            declared = client | {_name(p) for p in AH_PINS}
        undeclared += _undeclared(path, declared | extras["bench"])
    assert undeclared == []


def test_the_check_sees_an_undeclared_import(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text(
        "import os\nimport referencing.jsonschema\nfrom pizzabot.agent import model\n"
    )
    assert _third_party(module) == {"referencing"}
