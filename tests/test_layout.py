"""Imports point inward: `agent` imports no other package of the project; `store` and
`channels` plug into `agent` and never import `bot`; only `bot` imports everything."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = {"agent", "store", "channels", "bot"}
ALLOWED = {
    "agent": {"agent"},
    "store": {"agent", "store"},
    "channels": {"agent", "channels"},
    "bot": PACKAGES,
}


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
    return found & PACKAGES


def test_imports_point_inward() -> None:
    wrong = []
    for package, allowed in ALLOWED.items():
        for path in sorted((ROOT / package).rglob("*.py")):
            for imported in sorted(_imports(path) - allowed):
                wrong.append(f"{path.relative_to(ROOT)} imports {imported}")
    assert wrong == []


def test_the_walk_sees_a_wrong_arrow(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("import os\nfrom bot.settings import Settings\nfrom store import sql\n")
    assert _imports(bad) == {"bot", "store"}


def test_only_bot_reads_the_environment() -> None:
    offenders = []
    for package in ("agent", "store", "channels"):
        for path in sorted((ROOT / package).rglob("*.py")):
            text = path.read_text()
            if "os.environ[" in text or "os.getenv(" in text or "os.environ.get(" in text:
                offenders.append(str(path.relative_to(ROOT)))
    # agent/llm.py sets litellm's offline price-map switch before importing it; it reads nothing.
    assert offenders == []
