"""The `files` MCP server: the operations of `ops`, offered as tools over stdio.

    python -m pizzabot.tools.files --grant /abs/notes --grant-write /abs/drafts

The write tools exist only when at least one folder is writable, so a read-only skill cannot
even ask to write; with them comes `preview_write`, the diff a write would make, which the
engine shows on a write's approval card.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Annotated, Protocol

from pydantic import Field

from pizzabot.tools.files.diffs import write_diff
from pizzabot.tools.files.grants import FolderGrants, FolderGrantsRefused, PathRefused
from pizzabot.tools.files.ops import (
    READ_CAP,
    SEARCH_CAP,
    SEARCH_DEFAULT,
    list_dir,
    move,
    read_file,
    search,
    write_file,
)

if TYPE_CHECKING:
    # Importing the SDK takes seconds; the server process needs it, the engine does not.
    from mcp.server.mcpserver import MCPServer

_PATH_RULE = (
    "Paths are '<folder>/<path inside it>', e.g. 'notes/todo.md', where <folder> is a granted "
    "folder's name; an absolute path inside a granted folder also works. Nothing outside the "
    "granted folders can be reached, and symbolic links are not followed."
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
    except OSError as exc:
        raise ToolError(f"{type(exc).__name__}: {exc}") from None


def build_server(grants: FolderGrants) -> MCPServer:
    """The `files` MCP server for these grants; the write tools only when something is writable."""
    from mcp.server.mcpserver import MCPServer

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
    _add_reading_tools(server, grants)
    if grants.any_writable:
        _add_writing_tools(server, grants)
    return server


def _add_reading_tools(server: MCPServer, grants: FolderGrants) -> None:
    from mcp_types import ToolAnnotations

    rule = f"Granted folders: {grants.summary()}. {_PATH_RULE}"
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


def _add_writing_tools(server: MCPServer, grants: FolderGrants) -> None:
    from mcp_types import ToolAnnotations

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

    def preview_write_tool(path: _PathArg, content: str) -> str:
        with _as_tool_error():
            return write_diff(grants, path, content)

    server.add_tool(
        preview_write_tool,
        name="preview_write",
        description="Show the unified diff write_file(path, content) would make, without "
        "writing anything (the approval card of a write shows it). " + _PATH_RULE,
        annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False),
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


class FolderLike(Protocol):
    """What a skill's folder entry offers (`pizzabot.agent.skills.Folder` fits)."""

    @property
    def path(self) -> str: ...

    @property
    def write(self) -> bool: ...


def launch_args(folders: Iterable[FolderLike]) -> list[str]:
    """Arguments after the Python executable that start this server for `folders`."""
    args = ["-m", "pizzabot.tools.files"]
    for folder in folders:
        args += ["--grant-write" if folder.write else "--grant", os.path.expanduser(folder.path)]
    return args


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m pizzabot.tools.files", description="Serve granted folders over MCP (stdio)."
    )
    parser.add_argument("--grant", action="append", default=[], metavar="DIR", help="read-only")
    parser.add_argument("--grant-write", action="append", default=[], metavar="DIR")
    ns = parser.parse_args(argv)
    try:
        grants = FolderGrants([(p, False) for p in ns.grant] + [(p, True) for p in ns.grant_write])
    except FolderGrantsRefused as exc:
        parser.error(str(exc))
    build_server(grants).run()
