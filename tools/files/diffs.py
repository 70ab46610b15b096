"""What a write would change, without writing: the unified diff between the file as it is
inside the granted folder and the content a `write_file` call proposes.

The engine shows it on the write's approval card (`pizzabot.agent.preview`). It reaches the
disk only through `FolderGrants` and only to read, as `read_file` does, and it says so when
the write itself would be refused (a read-only folder, a link, a folder in the way).
"""

from __future__ import annotations

import difflib

from pizzabot.tools.files.grants import FolderGrants, PathRefused
from pizzabot.tools.files.ops import _open_regular, _read_all, _refuse_unless_replaceable

__all__ = ["DIFF_READ_CAP", "write_diff"]

#: Most bytes of the current file read for a diff; a longer file is compared by its size.
DIFF_READ_CAP = 1_000_000


def _current(grants: FolderGrants, path: str) -> tuple[str, str | None]:
    """The file's name as shown, and its text now (None: there is no such file yet)."""
    try:
        with grants.spot(path, write=True) as spot:
            if not spot.name:
                raise PathRefused(f"{path!r} is a folder")
            st = spot.lstat()
            _refuse_unless_replaceable(spot, path, st)
            if st is None:
                return spot.shown, None
            with _open_regular(spot, path) as (fd, opened):
                if opened.st_size > DIFF_READ_CAP:
                    raise PathRefused(f"{spot.shown} is {opened.st_size} bytes: too big to compare")
                data = _read_all(fd, opened.st_size)
    except FileNotFoundError:
        return path, None  # a folder on the way is missing: the write would make it
    if b"\x00" in data[:8192]:
        raise PathRefused(f"{spot.shown} looks like a binary file ({len(data)} bytes)")
    return spot.shown, data.decode("utf-8", errors="replace")


def write_diff(grants: FolderGrants, path: str, content: str) -> str:
    """The unified diff `write_file(path, content)` would make, or what refuses it."""
    shown, before = _current(grants, path)
    if before == content:
        return f"{shown}: no change (the file already holds this content)"
    old = [] if before is None else before.splitlines(keepends=True)
    new = content.splitlines(keepends=True)
    lines = list(
        difflib.unified_diff(
            old,
            new,
            fromfile="/dev/null" if before is None else f"a/{shown}",
            tofile=f"b/{shown}",
            lineterm="",
        )
    )
    # Lines keep their own ends; the headers have none.
    text = "".join(line if line.endswith("\n") else line + "\n" for line in lines)
    head = f"new file {shown}" if before is None else f"changes to {shown}"
    return f"{head} ({len(content.encode('utf-8'))} bytes after the write)\n{text}"
