"""The house: which part may import which, no loops, short modules, settings read in one
place.

The one package `pizzabot` is made of the repository's folders (pyproject.toml maps them):
`agent` (the engine) imports no other part; `store` plugs into `agent`; `channels` (every face
to the outside: Slack, mail, the web page, the HTTP API, the MCP endpoint, schedules and
webhooks) plugs into `agent` and may use the client's shared shapes; `cli` is a client of the
API and imports nothing of the server; `tools` (the files tool server) stands apart; `bot`
only wires, and imports everything. The client (`client/`, `pizzabot.client`) is a
distribution of its own and imports nothing of the server; the bench (`bench/`) is a
development tool outside the wheel.

No two modules import each other, however roundabout the loop: every import statement that
runs counts, at module level and inside functions alike, and so do imports under
`if TYPE_CHECKING:` — a loop that exists only for the type checker still says two modules
know each other.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: Each part of the house: its folder, and the import name its modules have.
PARTS = {
    "agent": ROOT / "agent",
    "store": ROOT / "store",
    "channels": ROOT / "channels",
    "cli": ROOT / "cli",
    "tools": ROOT / "tools",
    "bot": ROOT / "bot",
    "client": ROOT / "client" / "pizzabot" / "client",
    "bench": ROOT / "bench",
}
ALLOWED = {
    "agent": {"agent"},
    "store": {"agent", "store"},
    "channels": {"agent", "channels", "client"},
    "cli": {"cli", "client"},
    "tools": {"tools"},
    # The composition root wires everything; `pizzabot bench` runs the bench of a checkout.
    "bot": {"agent", "store", "channels", "cli", "tools", "bot", "client", "bench"},
    "client": {"client"},
    "bench": set(PARTS),
}


def _part_of(module: str) -> str | None:
    """The part a dotted module name belongs to (None: not the project's)."""
    parts = module.split(".")
    if parts[0] == "bench":
        return "bench"
    if parts[0] != "pizzabot" or len(parts) < 2:
        return None
    return parts[1] if parts[1] in PARTS else None


def _name_of(root: Path, part: str, path: Path) -> str:
    """A module's dotted name, its package by its `__init__`."""
    rel = path.relative_to(root / _folder(part)).with_suffix("").parts
    rel = rel[:-1] if rel[-1] == "__init__" else rel
    base = ["bench"] if part == "bench" else ["pizzabot", part]
    return ".".join([*base, *rel])


def _folder(part: str) -> Path:
    return PARTS[part].relative_to(ROOT)


def _imports(path: Path) -> set[str]:
    """Every module name an import statement in `path` names."""
    tree = ast.parse(path.read_text(), str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def test_imports_point_inward() -> None:
    wrong = []
    for part, allowed in ALLOWED.items():
        for path in sorted(PARTS[part].rglob("*.py")):
            for imported in sorted(_imports(path)):
                other = _part_of(imported)
                if other is not None and other not in allowed:
                    wrong.append(f"{path.relative_to(ROOT)} imports {imported}")
    assert wrong == []


def test_nothing_imports_the_old_top_level_names() -> None:
    """Every module is imported as `pizzabot.…`: a module loaded under two names would be two
    modules, with two copies of its state."""
    old = {"agent", "store", "channels", "cli", "tools", "bot"}
    wrong = [
        f"{path.relative_to(ROOT)} imports {imported}"
        for part in PARTS
        for path in sorted(PARTS[part].rglob("*.py"))
        for imported in sorted(_imports(path))
        if imported.split(".")[0] in old
    ]
    assert wrong == []


def test_the_walk_sees_a_wrong_arrow(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text(
        "import os\nfrom pizzabot.bot.settings import Settings\nfrom pizzabot import store\n"
    )
    assert {_part_of(m) for m in _imports(bad)} == {None, "bot"}


# -- cycles ---------------------------------------------------------------------------------


def _modules(root: Path) -> dict[str, Path]:
    """Every module of the project by its dotted name (a package by its `__init__`)."""
    found: dict[str, Path] = {}
    for part in PARTS:
        folder = root / _folder(part)
        for path in sorted(folder.rglob("*.py")) if folder.exists() else []:
            found[_name_of(root, part, path)] = path
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


def _edges(modules: Mapping[str, Path]) -> dict[str, set[str]]:
    """Which project modules each module imports, anywhere in its code."""
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(), str(path))
        is_package = path.name == "__init__.py"
        out: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom):
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
    """A loop closed by an import inside a function, through a package's `__init__`, by a
    relative import, or only for the type checker, is a loop all the same."""
    files = {
        "bot/__init__.py": "",
        "bot/server.py": "from pizzabot.bot.services import Services\n",
        "bot/services.py": "def later():\n    from pizzabot.bot import wire_slack\n",
        "bot/wire_slack.py": "from . import server\n",
        "channels/__init__.py": "",
        "channels/slack/__init__.py": "from pizzabot.channels.slack.app import App\n",
        "channels/slack/app.py": "if True:\n    import pizzabot.channels.slack\n",
        "store/__init__.py": "from pizzabot.store import sql\n",
        "store/sql.py": "import pizzabot.agent.model\n",
        "agent/__init__.py": "",
        "agent/model.py": "from pizzabot.agent import engine\n",
        "agent/engine.py": (
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import pizzabot.agent.model\n"
        ),
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert _cycles(_edges(_modules(tmp_path))) == [
        ["pizzabot.agent.engine", "pizzabot.agent.model"],
        ["pizzabot.bot.server", "pizzabot.bot.services", "pizzabot.bot.wire_slack"],
        ["pizzabot.channels.slack", "pizzabot.channels.slack.app"],
    ]


# -- settings -------------------------------------------------------------------------------


def test_only_bot_reads_the_environment() -> None:
    """Settings are read in one place. (The CLI and the client take the server's address and
    token from the person who runs them, as their own options do; they are clients.)"""
    offenders = []
    for part in ("agent", "store", "channels", "tools"):
        for path in sorted(PARTS[part].rglob("*.py")):
            text = path.read_text()
            if "os.environ[" in text or "os.getenv(" in text or "os.environ.get(" in text:
                offenders.append(str(path.relative_to(ROOT)))
    # agent/llm.py sets litellm's offline price-map switch before importing it; it reads nothing.
    assert offenders == []


# -- lengths --------------------------------------------------------------------------------

# Every product module stays readable in one sitting: a module a person can hold in their
# head, a function that fits on a screen. Migrations are generated history; the bench and
# the tests are tools of development.
MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 60
#: `bot/` only wires: all of it fits in this many lines.
MAX_BOT_LINES = 3000
PRODUCT = ("agent", "channels", "store", "cli", "tools", "bot", "client")


def _too_long(root: Path) -> list[str]:
    found = []
    for part in PRODUCT:
        folder = root / _folder(part)
        for path in sorted(folder.rglob("*.py")) if folder.exists() else []:
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


def test_bot_only_wires() -> None:
    lines = sum(len(p.read_text().splitlines()) for p in PARTS["bot"].rglob("*.py"))
    assert lines <= MAX_BOT_LINES


def test_the_length_check_sees_a_long_function(tmp_path: Path) -> None:
    body = "\n".join(f"    x{k} = {k}" for k in range(MAX_FUNCTION_LINES))
    (tmp_path / "agent").mkdir()
    (tmp_path / "agent" / "long.py").write_text(f"def long() -> None:\n{body}\n")
    assert _too_long(tmp_path) == ["agent/long.py:1 long: 61 lines"]
