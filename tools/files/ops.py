"""What the `files` server can do, as plain functions over `FolderGrants`, so they test without a
server: list a folder, read, search, write and move files. Every one of them reaches the disk
through `grants`, which opens each component relative to the folder before it and never
follows a symbolic link, so `..`, paths elsewhere, links and folders swapped for links
mid-call all stay out.
"""

from __future__ import annotations

import errno
import fnmatch
import os
import secrets
import stat
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress

from pizzabot.tools.files.grants import (
    DIR_FLAGS,
    READ_FLAGS,
    Folder,
    FolderGrant,
    FolderGrants,
    PathRefused,
    Spot,
)

__all__ = [
    "FolderGrant",
    "FolderGrants",
    "PathRefused",
    "list_dir",
    "move",
    "read_file",
    "search",
    "write_file",
]

#: Most bytes one `read_file` returns; the model reads on with `offset`.
READ_CAP = 1_000_000
#: Most hits one `search` returns, and the default.
SEARCH_CAP = 200
SEARCH_DEFAULT = 50
#: Bounds on one search's work, so a huge tree cannot stall a run.
SEARCH_MAX_FILES = 20_000
SEARCH_MAX_FILE_BYTES = 2_000_000
SEARCH_MAX_DEPTH = 64
LIST_CAP = 1_000
_SKIP_DIRS = frozenset({".git", ".hg", ".svn", "__pycache__", "node_modules"})
_ROOTS = frozenset({"", ".", "/"})
_NEW_FILE_MODE = 0o644


# -- opening what a spot names, judged by what was opened ----------------------------------


@contextmanager
def _open_regular(spot: Spot, path: str) -> Iterator[tuple[int, os.stat_result]]:
    """The regular file at `spot`, opened for reading; a folder, link, FIFO or device is
    refused after the open, by what the descriptor is."""
    if not spot.name:
        raise PathRefused(f"{path!r} is a folder: use list_dir")
    try:
        fd = os.open(spot.name, READ_FLAGS, dir_fd=spot.folder.fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise FolderGrants.link_refusal(spot) from None
        if exc.errno == errno.ENOENT:
            raise FileNotFoundError(errno.ENOENT, "no such file", spot.shown) from None
        raise
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise PathRefused(f"{path!r} is a folder: use list_dir")
        if not stat.S_ISREG(st.st_mode):
            raise PathRefused(f"{path!r} is not a regular file")
        yield fd, st
    finally:
        os.close(fd)


def _read_all(fd: int, size: int) -> bytes:
    chunks: list[bytes] = []
    got = 0
    while got < size:
        chunk = os.read(fd, min(1 << 20, size - got))
        if not chunk:
            break
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


# -- the operations, plain functions over `FolderGrants` so they test without a server ---------


def list_dir(grants: FolderGrants, path: str) -> str:
    if path.strip() in _ROOTS:
        return "Granted folders:\n" + grants.describe()
    with grants.folder(path) as folder:
        with os.scandir(folder.fd) as it:
            entries = sorted(it, key=lambda e: e.name)
        lines = [_describe_entry(grants, folder, entry) for entry in entries[:LIST_CAP]]
        if not entries:
            return f"{folder.shown()}/ is empty"
    if len(entries) > LIST_CAP:
        lines.append(f"[{len(entries) - LIST_CAP} more entries not shown]")
    return "\n".join(lines)


def _describe_entry(grants: FolderGrants, folder: Folder, entry: os.DirEntry[str]) -> str:
    shown = folder.shown(entry.name)
    try:
        st = entry.stat(follow_symlinks=False)
    except OSError:
        return f"{shown}  (unreadable)"
    if stat.S_ISLNK(st.st_mode):
        return f"{shown}  (symbolic link; not followed)"
    if stat.S_ISDIR(st.st_mode):
        nested = grants.granted(st)
        if nested is not None and nested.writable != folder.grant.writable:
            return f"{shown}/  (granted {nested.access})"
        return f"{shown}/"
    if not stat.S_ISREG(st.st_mode):
        return f"{shown}  (not a regular file)"
    return f"{shown}  ({st.st_size} bytes)"


def read_file(grants: FolderGrants, path: str, max_bytes: int = READ_CAP, offset: int = 0) -> str:
    limit = max(1, min(max_bytes, READ_CAP))
    start = max(0, offset)
    with grants.spot(path) as spot, _open_regular(spot, path) as (fd, st):
        shown = spot.shown
        size = st.st_size
        data = os.pread(fd, limit, start)
    if b"\x00" in data[:8192]:
        return f"{shown} looks like a binary file ({size} bytes); not shown"
    text = data.decode("utf-8", errors="replace")
    end = start + len(data)
    if end < size:
        text += (
            f"\n[truncated: showed bytes {start}-{end} of {size}; "
            f"call read_file with offset={end} to read on (at most {READ_CAP} bytes per call)]"
        )
    return text


def _walk(
    grants: FolderGrants, folder: Folder, *, skip_grants: bool, depth: int = 0
) -> Iterator[tuple[Folder, str]]:
    """Regular files under an opened folder as `(folder, name)`, a folder's own files before
    its subfolders'. Links are not followed; with `skip_grants`, a granted folder met on the
    way is left for its own turn."""
    with os.scandir(folder.fd) as it:
        entries = sorted(it, key=lambda e: e.name)
    subdirs: list[str] = []
    for entry in entries:
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode):
            yield folder, entry.name
        elif (
            stat.S_ISDIR(st.st_mode)
            and entry.name not in _SKIP_DIRS
            and not (skip_grants and grants.granted(st) is not None)
        ):
            subdirs.append(entry.name)
    if depth >= SEARCH_MAX_DEPTH:
        return
    for name in subdirs:
        try:
            fd = os.open(name, DIR_FLAGS, dir_fd=folder.fd)
        except OSError:
            continue  # swapped for a link or removed since the listing: not followed
        try:
            nested = grants.granted(os.fstat(fd))
            child = (
                Folder(fd, nested, ())
                if nested is not None
                else Folder(fd, folder.grant, (*folder.parts, name))
            )
            yield from _walk(grants, child, skip_grants=skip_grants, depth=depth + 1)
        finally:
            os.close(fd)


def search(
    grants: FolderGrants, pattern: str, path: str = "", max_results: int = SEARCH_DEFAULT
) -> str:
    if not pattern:
        raise PathRefused("search needs a non-empty pattern")
    limit = max(1, min(max_results, SEARCH_CAP))
    everywhere = path.strip() in _ROOTS
    tops = [g.name for g in grants.folders] if everywhere else [path]
    is_glob = any(c in pattern for c in "*?[")
    needle = pattern.casefold()
    hits: list[str] = []
    scanned = 0
    for top in tops:
        with grants.folder(top) as folder:
            for where, name in _walk(grants, folder, skip_grants=everywhere):
                scanned += 1
                if scanned > SEARCH_MAX_FILES or len(hits) >= limit:
                    break
                shown = where.shown(name)
                rel = shown.partition("/")[2]
                if is_glob:
                    if fnmatch.fnmatch(name, pattern) or fnmatch.fnmatch(rel, pattern):
                        hits.append(shown)
                    continue
                if needle in name.casefold():
                    hits.append(shown)
                    continue
                hits.extend(_grep(Spot(where, name), needle, limit - len(hits)))
    lines = hits[:limit] or [f"no matches for {pattern!r}"]
    if len(hits) >= limit:
        lines.append(f"[stopped at {limit} results; narrow the pattern or the path]")
    elif scanned > SEARCH_MAX_FILES:
        lines.append(f"[stopped after {SEARCH_MAX_FILES} files; search a narrower path]")
    return "\n".join(lines)


def _grep(spot: Spot, needle: str, room: int) -> list[str]:
    try:
        with _open_regular(spot, spot.shown) as (fd, st):
            if st.st_size > SEARCH_MAX_FILE_BYTES:
                return []
            data = _read_all(fd, st.st_size)
    except (OSError, PathRefused):
        return []  # swapped or removed since the listing
    if b"\x00" in data[:8192]:
        return []
    hits: list[str] = []
    for number, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), 1):
        if needle in line.casefold():
            hits.append(f"{spot.shown}:{number}: {line.strip()[:200]}")
            if len(hits) >= room:
                break
    return hits


def _refuse_unless_replaceable(spot: Spot, path: str, st: os.stat_result | None) -> None:
    if st is None:
        return
    if stat.S_ISDIR(st.st_mode):
        raise PathRefused(f"{path!r} is a folder")
    if stat.S_ISLNK(st.st_mode):
        raise FolderGrants.link_refusal(spot)
    if not stat.S_ISREG(st.st_mode):
        raise PathRefused(f"{path!r} is not a regular file")


def _write_new(folder: Folder, name: str, chunks: Iterable[bytes], mode: int) -> None:
    """Write a file next to `name`, then rename it over `name`: a reader sees the old file or
    the new one, never half of it."""
    tmp = f".{name[:200]}.{secrets.token_hex(6)}.tmp"
    fd = os.open(
        tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600,
        dir_fd=folder.fd,
    )  # fmt: skip
    try:
        try:
            for chunk in chunks:
                view = memoryview(chunk)
                while view:
                    view = view[os.write(fd, view) :]
            os.fchmod(fd, mode)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, name, src_dir_fd=folder.fd, dst_dir_fd=folder.fd)
    except BaseException:
        with suppress(FileNotFoundError):
            os.unlink(tmp, dir_fd=folder.fd)
        raise


def write_file(grants: FolderGrants, path: str, content: str) -> str:
    data = content.encode("utf-8")
    with grants.spot(path, create=True, write=True) as spot:
        if not spot.name:
            raise PathRefused(f"{path!r} is a folder")
        st = spot.lstat()
        _refuse_unless_replaceable(spot, path, st)
        mode = stat.S_IMODE(st.st_mode) if st is not None else _NEW_FILE_MODE
        _write_new(spot.folder, spot.name, [data], mode)
        return f"wrote {len(data)} bytes to {spot.shown}"


def move(grants: FolderGrants, src: str, dst: str) -> str:
    with grants.spot(src, write=True) as source:
        st = source.lstat()
        if not source.name or (st is not None and grants.granted(st) is not None):
            raise PathRefused(f"{src!r} is a granted folder (or holds one) and cannot be moved")
        if st is None:
            raise PathRefused(f"{src!r} does not exist")
        if stat.S_ISLNK(st.st_mode):
            raise PathRefused(f"{src!r} is a symbolic link; moving links is not supported")
        if stat.S_ISDIR(st.st_mode) and grants.holds_a_root(source.real):
            raise PathRefused(f"{src!r} is a granted folder (or holds one) and cannot be moved")
        with grants.spot(dst, create=True, write=True) as target:
            if not target.name or target.lstat() is not None:
                raise PathRefused(f"{dst!r} already exists; moves never overwrite")
            if target.real.is_relative_to(source.real):
                raise PathRefused(f"cannot move {src!r} into itself")
            try:
                os.rename(
                    source.name, target.name,
                    src_dir_fd=source.folder.fd, dst_dir_fd=target.folder.fd,
                )  # fmt: skip
            except OSError as exc:
                if exc.errno != errno.EXDEV:
                    raise
                if stat.S_ISDIR(st.st_mode):
                    raise PathRefused(
                        f"{src!r} is a folder on another disk than {dst!r}; "
                        "move the files in it one by one"
                    ) from None
                _move_across_disks(source, target, src)
            return f"moved {source.shown} to {target.shown}"


def _move_across_disks(source: Spot, target: Spot, src: str) -> None:
    """A rename cannot cross file systems: copy the file through descriptors, then remove it."""
    with _open_regular(source, src) as (fd, st):

        def chunks() -> Iterator[bytes]:
            while chunk := os.read(fd, 1 << 20):
                yield chunk

        _write_new(target.folder, target.name, chunks(), stat.S_IMODE(st.st_mode))
    os.unlink(source.name, dir_fd=source.folder.fd)
