"""Granted folders, and the one way a model's path becomes an open file or folder.

Checking a path and then opening it by name races: between the two, a folder inside a grant
can be renamed and a link to anywhere put in its place, or a file swapped for a FIFO. So
nothing here opens a file by its full path. A path is first split, without touching the
disk, into a grant and components below it; the walk then opens the grant's folder and each
component relative to the folder opened before it (`openat`, Python's `dir_fd=`) with
`O_NOFOLLOW`, so no symbolic link is followed at any component, and every caller judges what
it opened (`fstat`), never what a name pointed to a moment earlier. Links inside granted
folders are not followed either, even ones that stay inside: the listing shows them as links.

Grants may nest (a read-only `drafts/locked` inside a writable `drafts`); the most specific
grant decides. A granted folder is recognised by its identity (device and inode, taken when
the server starts), so it keeps its access whichever path leads to it.
"""

from __future__ import annotations

import errno
import os
import posixpath
import stat
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

#: Flags for each folder of a walk: a link, a file or a FIFO in the way fails the open.
DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
#: Flags for reading a file: never a link, and never blocking (a FIFO opens at once and is
#: refused after `fstat`).
READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC

_ROOTS = frozenset({"", ".", "/"})


class FolderGrantsRefused(ValueError):
    """The folders handed to the files server cannot be served (none, or not a folder)."""


class PathRefused(Exception):
    """A path the grants do not allow; the message is written for the model to read."""


@dataclass(frozen=True)
class FolderGrant:
    """One granted folder: the name the model uses, its real location, and its access."""

    name: str
    root: Path
    writable: bool
    #: The root as the skill spelled it (made absolute), which may be a link to `root`.
    spelled: Path
    #: `(st_dev, st_ino)` of the root when the server started.
    ident: tuple[int, int]

    @property
    def access(self) -> str:
        return "read-write" if self.writable else "read-only"


@dataclass(frozen=True)
class Folder:
    """A folder opened by a walk: its descriptor, the most specific grant holding it, and
    its components below that grant's root."""

    fd: int
    grant: FolderGrant
    parts: tuple[str, ...]

    def shown(self, name: str = "") -> str:
        """How the model writes this folder (or `name` in it): `<grant>/<parts>/<name>`."""
        return "/".join((self.grant.name, *self.parts, *([name] if name else [])))

    def real(self, name: str = "") -> Path:
        """Where this folder (or `name` in it) was when the walk passed."""
        return self.grant.root.joinpath(*self.parts, *([name] if name else []))


@dataclass(frozen=True)
class Spot:
    """A name inside an opened folder; the name may not exist yet. `name` is empty when the
    path named a granted folder itself (then `folder` is that folder)."""

    folder: Folder
    name: str

    @property
    def shown(self) -> str:
        return self.folder.shown(self.name)

    @property
    def real(self) -> Path:
        return self.folder.real(self.name)

    def lstat(self) -> os.stat_result | None:
        """What the name is now, without following a link; None when it does not exist."""
        if not self.name:
            return os.fstat(self.folder.fd)
        try:
            return os.stat(self.name, dir_fd=self.folder.fd, follow_symlinks=False)
        except FileNotFoundError:
            return None


def _ident(st: os.stat_result) -> tuple[int, int]:
    return (st.st_dev, st.st_ino)


class FolderGrants:
    """The granted folders and the walk that turns a model's path into an open folder."""

    def __init__(self, folders: Sequence[tuple[str | Path, bool]]) -> None:
        """`folders` are `(path, writable)`; a folder granted twice keeps the wider access."""
        by_root: dict[Path, bool] = {}
        given: dict[Path, Path] = {}
        for raw, writable in folders:
            spelled = Path(os.path.abspath(os.path.expanduser(raw)))
            root = Path(os.path.realpath(spelled))
            if not root.is_dir():
                raise FolderGrantsRefused(f"granted folder {str(raw)!r} is not an existing folder")
            by_root[root] = by_root.get(root, False) or writable
            # Named as the skill spelled it: a granted `~/notes` linking elsewhere is `notes`.
            given.setdefault(root, spelled)
        if not by_root:
            raise FolderGrantsRefused("the files server needs at least one granted folder")
        grants: list[FolderGrant] = []
        taken: set[str] = set()
        for root, writable in by_root.items():
            base = given[root].name or "root"
            name, n = base, 1
            while name in taken:
                n += 1
                name = f"{base}-{n}"
            taken.add(name)
            grants.append(FolderGrant(name, root, writable, given[root], _ident(os.stat(root))))
        self.folders: tuple[FolderGrant, ...] = tuple(grants)
        self._by_name = {g.name: g for g in grants}
        self._by_ident = {g.ident: g for g in grants}

    @property
    def any_writable(self) -> bool:
        return any(g.writable for g in self.folders)

    def describe(self) -> str:
        """One line per folder, for the server's instructions and the root listing."""
        return "\n".join(f"{g.name}/  ({g.access})  = {g.root}" for g in self.folders)

    def summary(self) -> str:
        return ", ".join(f"{g.name}/ ({g.access})" for g in self.folders)

    def granted(self, st: os.stat_result) -> FolderGrant | None:
        """The grant whose root this opened folder is, if it is one."""
        return self._by_ident.get(_ident(st))

    def holds_a_root(self, real: Path) -> bool:
        """Whether a granted folder is `real` or lies inside it (it must not be moved)."""
        return any(g.root.is_relative_to(real) for g in self.folders)

    # -- from text to components, without touching the disk ------------------------------

    def locate(self, path: str) -> tuple[FolderGrant, tuple[str, ...]]:
        """The grant a path starts in and its components below that grant's root.

        `..` is settled here, on the text: the walk never meets it, so it cannot climb out.
        """
        if "\x00" in path:
            raise PathRefused(f"path {path!r} contains a NUL byte")
        if path.strip() in _ROOTS:
            raise PathRefused(
                f"path {path!r} names no file: start with a granted folder ({self.summary()})"
            )
        if os.path.isabs(path):
            return self._locate_absolute(path)
        name, _, rest = path.removeprefix("./").partition("/")
        grant = self._by_name.get(name)
        if grant is None:
            raise PathRefused(
                f"path {path!r} does not start with a granted folder name; "
                f"write paths as '<folder>/<path inside it>' with one of: {self.summary()}"
            )
        inside = posixpath.normpath(rest) if rest else "."
        if inside == ".." or inside.startswith(("../", "/")):
            raise self._outside(path)
        return grant, tuple(p for p in inside.split("/") if p not in {"", "."})

    def _locate_absolute(self, path: str) -> tuple[FolderGrant, tuple[str, ...]]:
        wanted = Path(posixpath.normpath(path))
        best: tuple[int, FolderGrant, tuple[str, ...]] | None = None
        for grant in self.folders:
            for base in (grant.root, grant.spelled):
                if wanted.is_relative_to(base):
                    depth = len(base.parts)
                    if best is None or depth > best[0]:
                        best = (depth, grant, wanted.relative_to(base).parts)
        if best is None:
            raise self._outside(path)
        return best[1], best[2]

    def _outside(self, path: str) -> PathRefused:
        return PathRefused(f"path {path!r} is outside the granted folders: {self.summary()}")

    # -- the walk ------------------------------------------------------------------------

    @contextmanager
    def folder(self, path: str, *, create: bool = False, write: bool = False) -> Iterator[Folder]:
        """The folder `path` names, opened; refused when it is not a folder inside the grants.

        `create` makes missing folders (only where the grant is writable); `write` refuses a
        folder whose most specific grant is read-only.
        """
        grant, parts = self.locate(path)
        with self._walk(path, grant, parts, create=create, write=write) as folder:
            yield folder

    @contextmanager
    def spot(self, path: str, *, create: bool = False, write: bool = False) -> Iterator[Spot]:
        """The folder holding the last component of `path`, opened, and that component.

        `create` makes the missing folders on the way; `write` refuses a place whose most
        specific grant is read-only.
        """
        grant, parts = self.locate(path)
        if not parts:
            with self._walk(path, grant, (), create=False, write=write) as folder:
                yield Spot(folder, "")
            return
        with self._walk(path, grant, parts[:-1], create=create, write=write) as folder:
            yield Spot(folder, parts[-1])

    @contextmanager
    def _walk(
        self, path: str, grant: FolderGrant, parts: tuple[str, ...], *, create: bool, write: bool
    ) -> Iterator[Folder]:
        # The root is the path the user granted, resolved at start; nothing the model can
        # write is on the way to it.
        fd = os.open(grant.root, DIR_FLAGS)
        try:
            here = Folder(fd, self.granted(os.fstat(fd)) or grant, ())
            for part in parts:
                try:
                    child = os.open(part, DIR_FLAGS, dir_fd=fd)
                except FileNotFoundError:
                    if not create:
                        raise FileNotFoundError(
                            errno.ENOENT, "no such file or folder", here.shown(part)
                        ) from None
                    if not here.grant.writable:
                        raise PathRefused(f"path {path!r} is granted read-only") from None
                    # Made meanwhile is fine: the open below judges what is there now.
                    with suppress(FileExistsError):
                        os.mkdir(part, 0o777, dir_fd=fd)
                    child = self._open_child(here, part)
                except OSError as exc:
                    if exc.errno in (errno.ENOTDIR, errno.ELOOP):
                        raise self._not_a_folder(here, part) from None
                    raise
                os.close(fd)
                fd = child
                nested = self.granted(os.fstat(fd))
                here = (
                    Folder(fd, nested, ())
                    if nested
                    else Folder(fd, here.grant, (*here.parts, part))
                )
            if write and not here.grant.writable:
                raise PathRefused(f"path {path!r} is granted read-only")
            yield here
        finally:
            os.close(fd)

    def _open_child(self, here: Folder, part: str) -> int:
        try:
            return os.open(part, DIR_FLAGS, dir_fd=here.fd)
        except OSError as exc:
            if exc.errno in (errno.ENOTDIR, errno.ELOOP):
                raise self._not_a_folder(here, part) from None
            raise

    @staticmethod
    def _not_a_folder(here: Folder, part: str) -> PathRefused:
        shown = here.shown(part)
        try:
            st = os.stat(part, dir_fd=here.fd, follow_symlinks=False)
        except OSError:
            return PathRefused(f"{shown!r} is not a folder")
        if stat.S_ISLNK(st.st_mode):
            return PathRefused(f"{shown!r} is a symbolic link; links are not followed")
        return PathRefused(f"{shown!r} is not a folder")

    @staticmethod
    def link_refusal(spot: Spot) -> PathRefused:
        return PathRefused(f"{spot.shown!r} is a symbolic link; links are not followed")
