"""What the code imports is what pyproject.toml declares.

A package the code imports but does not declare works only while some other dependency
happens to pull it in; an upgrade elsewhere can take it away. So every third-party import in
the shipped packages names a distribution pinned in `[project].dependencies`, except the
benchmark's (`bench*`), which may also use the `bench` extra, and each framework adapter
of the client (`client/pizzabot/client/<extra>.py`), which may also use its own extra: a plain install of
the server does not carry what only `pizzabot bench` or one adapter needs.
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

from bench.compare.lgvenv import PINS

ROOT = Path(__file__).resolve().parent.parent
LANGGRAPH_SIDE = ROOT / "bot" / "bench" / "compare" / "langgraph_side.py"
SHIPPED = ("agent", "bot", "channels", "store")
PROJECT = {*SHIPPED, "tests"}


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
            if top not in sys.stdlib_module_names and top not in PROJECT:
                found.add(top)
    return found


def _is_bench(path: Path) -> bool:
    rel = path.relative_to(ROOT)
    return rel.parts[0] == "bot" and rel.parts[1].startswith("bench")


def _extra(path: Path) -> str | None:
    """The extra a module may use besides the runtime dependencies."""
    rel = path.relative_to(ROOT)
    if _is_bench(path):
        return "bench"
    if rel.parts[:2] == ("bot", "client") and not rel.name.startswith("_"):
        return rel.stem.replace(
            "_", "-"
        )  # client/pizzabot/client/pydantic_ai.py: the pydantic-ai extra
    return None


def test_every_imported_package_is_declared() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    runtime = {_name(r) for r in project["dependencies"]}
    extras = project["optional-dependencies"]
    installed = packages_distributions()
    undeclared: list[str] = []
    for package in SHIPPED:
        for path in sorted((ROOT / package).rglob("*.py")):
            extra = _extra(path)
            declared = runtime | {_name(r) for r in extras.get(extra, [])} if extra else runtime
            if path == LANGGRAPH_SIDE:  # runs in the bench's own LangGraph virtualenv
                declared = {_name(pin) for pin in PINS}
            for module in sorted(_third_party(path)):
                dists = {_name(d) for d in installed.get(module, [module])}
                if not dists & declared:
                    undeclared.append(f"{path.relative_to(ROOT)}: {module} ({', '.join(dists)})")
    assert undeclared == []


def test_the_check_sees_an_undeclared_import(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("import os\nimport referencing.jsonschema\nfrom agent import model\n")
    assert _third_party(module) == {"referencing"}
