"""The built-in `files` MCP server: a skill's granted folders, and nothing else on the disk.

A skill lists folders (`folders: [{path: ~/notes}, {path: ~/drafts, write: true}]`) and the
engine launches this module as a stdio MCP server named `files`:

    python -m agent.files_mcp --grant /abs/notes --grant-write /abs/drafts

The model addresses a file as `<folder name>/<path inside it>` (`notes/2024/ideas.md`), where
the folder name is the granted folder's base name (made unique with `-2`, `-3`, ... when two
grants share one); an absolute path inside a granted folder is accepted too. Every path is
resolved with `os.path.realpath` before use, so `..`, absolute paths elsewhere and symlinks
that lead out (a linked file or a linked parent folder) are refused. The write tools exist
only when at least one folder is writable, so a read-only skill cannot even ask to write.

The path rules live in `Grants`, which knows nothing about MCP and is unit-tested alone.
"""

from __future__ import annotations

import argparse
import fnmatch
import os
import shutil
import stat
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Protocol

from pydantic import Field

from agent.errors import UserError

if TYPE_CHECKING:
    # Importing the SDK takes seconds; the engine imports this module only for `launch_args`.
    from mcp.server.mcpserver import MCPServer

#: Most bytes one `read_file` returns; the model reads on with `offset`.
READ_CAP = 1_000_000
#: Most hits one `search` returns, and the default.
SEARCH_CAP = 200
SEARCH_DEFAULT = 50
#: Bounds on one search's work, so a huge tree cannot stall a run.
SEARCH_MAX_FILES = 20_000
SEARCH_MAX_FILE_BYTES = 2_000_000
LIST_CAP = 1_000
_SKIP_DIRS = frozenset({".git", ".hg", ".svn", "__pycache__", "node_modules"})
_ROOTS = frozenset({"", ".", "/"})


class PathRefused(Exception):
    """A path the grants do not allow; the message is written for the model to read."""


@dataclass(frozen=True)
class Grant:
    """One granted folder: the name the model uses, its real location, and its access."""

    name: str
    root: Path
    writable: bool

    @property
    def access(self) -> str:
        return "read-write" if self.writable else "read-only"


class Grants:
    """The granted folders and the one rule for turning a model's path into a real one."""

    def __init__(self, folders: Sequence[tuple[str | Path, bool]]) -> None:
        """`folders` are `(path, writable)`; a folder granted twice keeps the wider access."""
        by_root: dict[Path, bool] = {}
        given: dict[Path, str] = {}
        for raw, writable in folders:
            spelled = os.path.abspath(os.path.expanduser(raw))
            root = Path(os.path.realpath(spelled))
            if not root.is_dir():
                raise UserError(f"granted folder {str(raw)!r} is not an existing folder")
            by_root[root] = by_root.get(root, False) or writable
            # Named as the skill spelled it: a granted `~/notes` linking elsewhere is `notes`.
            given.setdefault(root, Path(spelled).name)
        if not by_root:
            raise UserError("the files server needs at least one granted folder")
        grants: list[Grant] = []
        taken: set[str] = set()
        for root, writable in by_root.items():
            base = given[root] or "root"
            name, n = base, 1
            while name in taken:
                n += 1
                name = f"{base}-{n}"
            taken.add(name)
            grants.append(Grant(name, root, writable))
        self.folders: tuple[Grant, ...] = tuple(grants)
        self._by_name = {g.name: g for g in grants}

    @property
    def any_writable(self) -> bool:
        return any(g.writable for g in self.folders)

    def describe(self) -> str:
        """One line per folder, for the server's instructions and the root listing."""
        return "\n".join(f"{g.name}/  ({g.access})  = {g.root}" for g in self.folders)

    def summary(self) -> str:
        return ", ".join(f"{g.name}/ ({g.access})" for g in self.folders)

    def locate(self, path: str) -> Path:
        """The path as the model named it, made absolute but not yet resolved."""
        if path.strip() in _ROOTS:
            raise PathRefused(
                f"path {path!r} names no file: start with a granted folder ({self.summary()})"
            )
        if "\x00" in path:
            raise PathRefused(f"path {path!r} contains a NUL byte")
        if os.path.isabs(path):
            return Path(path)
        name, _, rest = path.removeprefix("./").partition("/")
        grant = self._by_name.get(name)
        if grant is None:
            raise PathRefused(
                f"path {path!r} does not start with a granted folder name; "
                f"write paths as '<folder>/<path inside it>' with one of: {self.summary()}"
            )
        return grant.root / rest if rest else grant.root

    def resolve(self, path: str, *, write: bool = False) -> Path:
        """The real path behind `path`, or `PathRefused` when it leaves the grants.

        Symlinks are resolved first, so a link pointing out (or a linked parent folder) is
        judged by where it leads. A path that does not exist yet resolves through its
        existing parents, which is what a write needs.
        """
        real = Path(os.path.realpath(self.locate(path)))
        holders = [g for g in self.folders if real.is_relative_to(g.root)]
        if not holders:
            raise PathRefused(f"path {path!r} is outside the granted folders: {self.summary()}")
        if write and not any(g.writable for g in holders):
            raise PathRefused(f"path {path!r} is granted read-only")
        return real

    def grant_of(self, real: Path) -> Grant:
        """The most specific grant holding an already resolved path (nested grants exist)."""
        holders = [g for g in self.folders if real.is_relative_to(g.root)]
        if not holders:
            raise PathRefused(f"path {str(real)!r} is outside the granted folders")
        return max(holders, key=lambda g: len(g.root.parts))

    def contains(self, real: Path) -> bool:
        return any(real.is_relative_to(g.root) for g in self.folders)

    def display(self, real: Path) -> str:
        """How the model should write a resolved path: `<folder>/<rel>`."""
        grant = self.grant_of(real)
        rel = real.relative_to(grant.root).as_posix()
        return grant.name if rel == "." else f"{grant.name}/{rel}"


# -- the operations, plain functions over `Grants` so they test without a server ---------


def list_dir(grants: Grants, path: str) -> str:
    if path.strip() in _ROOTS:
        return "Granted folders:\n" + grants.describe()
    real = grants.resolve(path)
    if not real.is_dir():
        raise PathRefused(f"{path!r} is not a folder")
    lines: list[str] = []
    with os.scandir(real) as it:
        entries = sorted(it, key=lambda e: e.name)
    for entry in entries[:LIST_CAP]:
        shown = f"{grants.display(real)}/{entry.name}"
        try:
            if entry.is_symlink() and not grants.contains(Path(os.path.realpath(entry.path))):
                lines.append(f"{shown}  (link leading outside the granted folders)")
            elif entry.is_dir():
                lines.append(f"{shown}/")
            else:
                lines.append(f"{shown}  ({entry.stat().st_size} bytes)")
        except OSError:
            lines.append(f"{shown}  (unreadable)")
    if not entries:
        return f"{grants.display(real)}/ is empty"
    if len(entries) > LIST_CAP:
        lines.append(f"[{len(entries) - LIST_CAP} more entries not shown]")
    return "\n".join(lines)


def read_file(grants: Grants, path: str, max_bytes: int = READ_CAP, offset: int = 0) -> str:
    real = grants.resolve(path)
    if real.is_dir():
        raise PathRefused(f"{path!r} is a folder: use list_dir")
    if real.exists() and not real.is_file():
        raise PathRefused(f"{path!r} is not a regular file")
    limit = max(1, min(max_bytes, READ_CAP))
    size = real.stat().st_size
    with real.open("rb") as fh:
        fh.seek(max(0, offset))
        data = fh.read(limit)
    if b"\x00" in data[:8192]:
        return f"{grants.display(real)} looks like a binary file ({size} bytes); not shown"
    text = data.decode("utf-8", errors="replace")
    end = max(0, offset) + len(data)
    if end < size:
        text += (
            f"\n[truncated: showed bytes {max(0, offset)}-{end} of {size}; "
            f"call read_file with offset={end} to read on (at most {READ_CAP} bytes per call)]"
        )
    return text


def _walk(grants: Grants, top: Path) -> Iterator[Path]:
    for dirpath, dirnames, filenames in os.walk(top):
        # Linked folders are not followed: a link out must not widen the search.
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS)
        for name in sorted(filenames):
            yield Path(dirpath) / name


def search(grants: Grants, pattern: str, path: str = "", max_results: int = SEARCH_DEFAULT) -> str:
    if not pattern:
        raise PathRefused("search needs a non-empty pattern")
    limit = max(1, min(max_results, SEARCH_CAP))
    tops = [g.root for g in grants.folders] if path.strip() in _ROOTS else [grants.resolve(path)]
    is_glob = any(c in pattern for c in "*?[")
    needle = pattern.casefold()
    hits: list[str] = []
    scanned = 0
    for top in tops:
        for file in _walk(grants, top):
            scanned += 1
            if scanned > SEARCH_MAX_FILES or len(hits) >= limit:
                break
            real = Path(os.path.realpath(file))
            if not grants.contains(real) or not real.is_file():
                continue
            shown = grants.display(file)
            rel = shown.partition("/")[2]
            if is_glob:
                if fnmatch.fnmatch(file.name, pattern) or fnmatch.fnmatch(rel, pattern):
                    hits.append(shown)
                continue
            if needle in file.name.casefold():
                hits.append(shown)
                continue
            hits.extend(_grep(real, shown, needle, limit - len(hits)))
    lines = hits[:limit] or [f"no matches for {pattern!r}"]
    if len(hits) >= limit:
        lines.append(f"[stopped at {limit} results; narrow the pattern or the path]")
    elif scanned > SEARCH_MAX_FILES:
        lines.append(f"[stopped after {SEARCH_MAX_FILES} files; search a narrower path]")
    return "\n".join(lines)


def _grep(real: Path, shown: str, needle: str, room: int) -> list[str]:
    try:
        if real.stat().st_size > SEARCH_MAX_FILE_BYTES:
            return []
        data = real.read_bytes()
    except OSError:
        return []
    if b"\x00" in data[:8192]:
        return []
    hits: list[str] = []
    for number, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), 1):
        if needle in line.casefold():
            hits.append(f"{shown}:{number}: {line.strip()[:200]}")
            if len(hits) >= room:
                break
    return hits


def write_file(grants: Grants, path: str, content: str) -> str:
    real = grants.resolve(path, write=True)
    if real.is_dir():
        raise PathRefused(f"{path!r} is a folder")
    real.parent.mkdir(parents=True, exist_ok=True)
    # Resolve again: the folders just made are real now, and must still be inside.
    real = grants.resolve(path, write=True)
    data = content.encode("utf-8")
    mode = stat.S_IMODE(real.stat().st_mode) if real.exists() else 0o644
    fd, tmp = tempfile.mkstemp(dir=real.parent, prefix=f".{real.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        # A reader sees the old file or the new one, never half of it.
        os.replace(tmp, real)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return f"wrote {len(data)} bytes to {grants.display(real)}"


def move(grants: Grants, src: str, dst: str) -> str:
    source = grants.resolve(src, write=True)
    target = grants.resolve(dst, write=True)
    if os.path.islink(grants.locate(src)):
        # Resolving would move the link's target instead of the link: refuse the surprise.
        raise PathRefused(f"{src!r} is a symbolic link; moving links is not supported")
    if not source.exists():
        raise PathRefused(f"{src!r} does not exist")
    if any(g.root.is_relative_to(source) for g in grants.folders):
        raise PathRefused(f"{src!r} is a granted folder (or holds one) and cannot be moved")
    if target.exists():
        raise PathRefused(f"{dst!r} already exists; moves never overwrite")
    if target.is_relative_to(source):
        raise PathRefused(f"cannot move {src!r} into itself")
    target.parent.mkdir(parents=True, exist_ok=True)
    target = grants.resolve(dst, write=True)
    # shutil.move falls back to copy-and-delete when the grants sit on different disks.
    shutil.move(source, target)
    return f"moved {grants.display(source)} to {grants.display(target)}"


# -- the MCP server -----------------------------------------------------------------------

_PATH_RULE = (
    "Paths are '<folder>/<path inside it>', e.g. 'notes/todo.md', where <folder> is a granted "
    "folder's name; an absolute path inside a granted folder also works. Nothing outside the "
    "granted folders can be reached."
)


# Module level: with postponed annotations the SDK evaluates tool signatures in these globals.
_PathArg = Annotated[str, Field(description="'<folder>/<path inside it>', e.g. 'notes/a.md'")]


@contextmanager
def _as_tool_error() -> Iterator[None]:
    from mcp.server.mcpserver.exceptions import ToolError

    try:
        yield
    except PathRefused as exc:
        raise ToolError(str(exc)) from None
    except FileNotFoundError as exc:
        raise ToolError(f"no such file or folder: {exc.filename}") from None
    except (OSError, shutil.Error) as exc:
        raise ToolError(f"{type(exc).__name__}: {exc}") from None


def build_server(grants: Grants) -> MCPServer:
    """The `files` MCP server for these grants; the write tools only when something is writable."""
    from mcp.server.mcpserver import MCPServer
    from mcp_types import ToolAnnotations

    folders = grants.summary()
    rule = f"Granted folders: {folders}. {_PATH_RULE}"
    server: MCPServer = MCPServer(
        "files",
        instructions=(
            "Files in the folders granted to this skill.\n"
            + grants.describe()
            + "\n"
            + _PATH_RULE
            + ("" if grants.any_writable else "\nAll folders are read-only.")
        ),
    )
    reading = ToolAnnotations(read_only_hint=True, open_world_hint=False)

    def list_dir_tool(
        path: Annotated[str, Field(description="A folder; '' lists the granted folders")] = "",
    ) -> str:
        with _as_tool_error():
            return list_dir(grants, path)

    def read_file_tool(
        path: _PathArg,
        max_bytes: Annotated[int, Field(description=f"At most {READ_CAP}")] = READ_CAP,
        offset: Annotated[int, Field(description="Byte to start at, to read on")] = 0,
    ) -> str:
        with _as_tool_error():
            return read_file(grants, path, max_bytes, offset)

    def search_tool(
        pattern: Annotated[str, Field(description="Text to find, or a glob like '*.md'")],
        path: Annotated[str, Field(description="Folder to search; '' means all")] = "",
        max_results: Annotated[int, Field(description=f"At most {SEARCH_CAP}")] = SEARCH_DEFAULT,
    ) -> str:
        with _as_tool_error():
            return search(grants, pattern, path, max_results)

    server.add_tool(
        list_dir_tool,
        name="list_dir",
        description="List a folder; list_dir('') lists the granted folders. " + rule,
        annotations=reading,
        structured_output=False,
    )
    server.add_tool(
        read_file_tool,
        name="read_file",
        description=f"Read a text file (at most {READ_CAP} bytes per call; a longer file is "
        "truncated with a note saying so, read on with offset). " + rule,
        annotations=reading,
        structured_output=False,
    )
    server.add_tool(
        search_tool,
        name="search",
        description="Find files under a folder. A glob pattern (with * ? or [) matches file "
        "names; plain text matches file names and lines of text files, case-insensitively. "
        f"Returns at most {SEARCH_CAP} hits as 'path' or 'path:line: text'. " + rule,
        annotations=reading,
        structured_output=False,
    )
    if grants.any_writable:
        writable = ", ".join(f"{g.name}/" for g in grants.folders if g.writable)

        def write_file_tool(path: _PathArg, content: str) -> str:
            with _as_tool_error():
                return write_file(grants, path, content)

        def move_tool(
            src: Annotated[str, Field(description="File or folder to move")],
            dst: Annotated[str, Field(description="Its new full path (must not exist)")],
        ) -> str:
            with _as_tool_error():
                return move(grants, src, dst)

        server.add_tool(
            write_file_tool,
            name="write_file",
            description="Create or replace a UTF-8 text file (atomically; missing folders are "
            f"made). Writable folders: {writable}; the others are read-only. " + _PATH_RULE,
            annotations=ToolAnnotations(destructive_hint=True, idempotent_hint=True),
            structured_output=False,
        )
        server.add_tool(
            move_tool,
            name="move",
            description="Move or rename a file or folder. Both ends must be in writable "
            f"folders ({writable}); an existing destination is never overwritten. " + _PATH_RULE,
            annotations=ToolAnnotations(destructive_hint=True, idempotent_hint=False),
            structured_output=False,
        )
    return server


class FolderLike(Protocol):
    """What a skill's folder entry offers (`agent.skills.Folder` fits)."""

    @property
    def path(self) -> str: ...

    @property
    def write(self) -> bool: ...


def launch_args(folders: Iterable[FolderLike]) -> list[str]:
    """Arguments after the Python executable that start this server for `folders`."""
    args = ["-m", "agent.files_mcp"]
    for folder in folders:
        args += ["--grant-write" if folder.write else "--grant", os.path.expanduser(folder.path)]
    return args


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m agent.files_mcp", description="Serve granted folders over MCP (stdio)."
    )
    parser.add_argument("--grant", action="append", default=[], metavar="DIR", help="read-only")
    parser.add_argument("--grant-write", action="append", default=[], metavar="DIR")
    ns = parser.parse_args(argv)
    try:
        grants = Grants([(p, False) for p in ns.grant] + [(p, True) for p in ns.grant_write])
    except UserError as exc:
        parser.error(str(exc))
    build_server(grants).run()


if __name__ == "__main__":
    main()
