"""The built-in `files` MCP server: a skill's granted folders, and nothing else on the disk.

A program Pizza Bot ships and starts, not part of the engine: a skill lists folders
(`folders: [{path: ~/notes}, {path: ~/drafts, write: true}]`) and `bot/` adds a stdio MCP
server named `files` to that skill's servers, started as

    python -m pizzabot.tools.files --grant /abs/notes --grant-write /abs/drafts

The model addresses a file as `<folder name>/<path inside it>` (`notes/2024/ideas.md`), where
the folder name is the granted folder's base name (made unique with `-2`, `-3`, ... when two
grants share one); an absolute path inside a granted folder is accepted too.

- `grants`: granted folders, and the one way a path becomes an open file or folder;
- `ops`: the operations (list, read, search, write, move) as plain functions over `FolderGrants`;
- `server`: the MCP server offering them as tools, and its command line (`launch_args`).
"""

from pizzabot.tools.files.grants import FolderGrant, FolderGrants, PathRefused
from pizzabot.tools.files.ops import list_dir, move, read_file, search, write_file
from pizzabot.tools.files.server import build_server, launch_args, main

__all__ = [
    "FolderGrant",
    "FolderGrants",
    "PathRefused",
    "build_server",
    "launch_args",
    "list_dir",
    "main",
    "move",
    "read_file",
    "search",
    "write_file",
]
