"""Imports point inward: `agent` imports no other package of the project; `store` and
`channels` plug into `agent` and never import `bot`; only `bot` imports everything. And no
two modules of the project import each other, however roundabout the loop.

The cycle walk counts every import statement that runs: at module level and inside functions
alike. An import moved into a function still runs (later), so a loop through it is still a
loop: it only hides which module needs which, and makes the order of first imports decide
whether a name exists yet. Imports under `if TYPE_CHECKING:` never run; they let two types
name each other in annotations, and are left out.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
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


# -- cycles ---------------------------------------------------------------------------------


def _modules(root: Path) -> dict[str, Path]:
    """Every module of the project by its dotted name (a package by its `__init__`)."""
    found: dict[str, Path] = {}
    for package in sorted(PACKAGES):
        for path in sorted((root / package).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            found[name] = path
    return found


def _targets(
    node: ast.Import | ast.ImportFrom, here: str, is_package: bool, modules: Mapping[str, Path]
) -> Iterable[str]:
    """The project modules an import statement loads: `from a.b import c` loads the module
    `a.b.c` when there is one, else `a.b` (for its name `c`). Parent packages that Python
    imports on the way are not counted, for `import a.b` as for `from a import b`: else every
    package whose `__init__` gathers its modules would loop with each of them."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    base = node.module or ""
    if node.level:  # relative: counted from this module's package
        package = here.split(".") if is_package else here.split(".")[:-1]
        package = package[: len(package) - (node.level - 1)]
        base = ".".join([*package, *([base] if base else [])])
    found = []
    for alias in node.names:
        sub = f"{base}.{alias.name}"
        found.append(sub if sub in modules else base)
    return found


def _type_checking_only(tree: ast.Module) -> set[ast.AST]:
    """The statements under `if TYPE_CHECKING:`, which never run."""
    skipped: set[ast.AST] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for stmt in node.body:
                skipped.update(ast.walk(stmt))
    return skipped


def _edges(modules: Mapping[str, Path]) -> dict[str, set[str]]:
    """Which project modules each module imports, anywhere in its code that runs."""
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(), str(path))
        skipped = _type_checking_only(tree)
        is_package = path.name == "__init__.py"
        out: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom) and node not in skipped:
                out.update(t for t in _targets(node, name, is_package, modules) if t in modules)
        out.discard(name)
        graph[name] = out
    return graph


def _cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(groups)


def test_no_module_of_the_project_imports_itself_back() -> None:
    assert _cycles(_edges(_modules(ROOT))) == []


def test_the_walk_sees_a_planted_cycle(tmp_path: Path) -> None:
    """A loop closed by an import inside a function, through a package's `__init__`, or by
    a relative import is a loop all the same; one closed only for the type checker is not."""
    files = {
        "bot/__init__.py": "",
        "bot/server.py": "from bot.services import Services\n",
        "bot/services.py": "def later():\n    from bot import wire_slack\n",
        "bot/wire_slack.py": "from . import server\n",
        "channels/__init__.py": "",
        "channels/slack/__init__.py": "from channels.slack.app import App\n",
        "channels/slack/app.py": "if True:\n    import channels.slack\n",
        "store/__init__.py": "from store import sql\n",
        "store/sql.py": "import agent.model\n",
        "agent/__init__.py": "",
        "agent/model.py": "from agent import engine\n",
        "agent/engine.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import agent.model\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert _cycles(_edges(_modules(tmp_path))) == [
        ["bot.server", "bot.services", "bot.wire_slack"],
        ["channels.slack", "channels.slack.app"],
    ]


def test_only_bot_reads_the_environment() -> None:
    offenders = []
    for package in ("agent", "store", "channels"):
        for path in sorted((ROOT / package).rglob("*.py")):
            text = path.read_text()
            if "os.environ[" in text or "os.getenv(" in text or "os.environ.get(" in text:
                offenders.append(str(path.relative_to(ROOT)))
    # agent/llm.py sets litellm's offline price-map switch before importing it; it reads nothing.
    assert offenders == []


# The core, the channels and the store stay readable in one sitting: a module a person can
# hold in their head, a function that fits on a screen. Migrations are generated history.
MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 60


def _too_long(root: Path) -> list[str]:
    found = []
    for package in ("agent", "channels", "store"):
        for path in sorted((root / package).rglob("*.py")):
            if "migrations" in path.parts:
                continue
            source = path.read_text()
            where = path.relative_to(root)
            if len(source.splitlines()) > MAX_MODULE_LINES:
                found.append(f"{where}: {len(source.splitlines())} lines")
            for node in ast.walk(ast.parse(source, str(path))):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    length = (node.end_lineno or node.lineno) - node.lineno + 1
                    if length > MAX_FUNCTION_LINES:
                        found.append(f"{where}:{node.lineno} {node.name}: {length} lines")
    return found


def test_modules_and_functions_stay_short() -> None:
    assert _too_long(ROOT) == []


def test_the_length_check_sees_a_long_function(tmp_path: Path) -> None:
    body = "\n".join(f"    x{k} = {k}" for k in range(MAX_FUNCTION_LINES))
    (tmp_path / "agent").mkdir()
    (tmp_path / "agent" / "long.py").write_text(f"def long() -> None:\n{body}\n")
    assert _too_long(tmp_path) == ["agent/long.py:1 long: 61 lines"]
