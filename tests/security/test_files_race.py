"""The files server against a grant that changes under it while it works.

Another process that can write in a granted folder swaps, over and over, a folder for a link
to a place outside the grants (or a file for a FIFO) with an atomic exchange of two names.
Checking a path and then opening it by name loses that race; the server must not: no read,
listing or search ever shows the outside, no write or move ever lands there, and no read
blocks on a FIFO.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import stat
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from functools import partial
from pathlib import Path

import pytest

from pizzabot.tools import files as files_server
from pizzabot.tools.files import FolderGrants

ROUNDS = 1500
_RENAME_EXCHANGE = 2
_AT_FDCWD = -100
_libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
_renameat2 = getattr(_libc, "renameat2", None)


def _exchange(a: Path, b: Path) -> None:
    """Swap two names atomically: at every moment each name exists."""
    if _renameat2 is not None:
        if _renameat2(_AT_FDCWD, bytes(a), _AT_FDCWD, bytes(b), _RENAME_EXCHANGE) != 0:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err))
        return
    # Without renameat2 (not glibc): two renames, each of them atomic.
    aside = a.with_name(a.name + ".aside")
    os.rename(a, aside)
    os.rename(b, a)
    os.rename(aside, b)


@contextmanager
def _swapping(a: Path, b: Path) -> Iterator[list[int]]:
    """Exchange `a` and `b` in a thread until the block ends; yields the swap count."""
    stop = threading.Event()
    count = [0]

    def swap() -> None:
        while not stop.is_set():
            _exchange(a, b)
            count[0] += 1

    thread = threading.Thread(target=swap, daemon=True)
    thread.start()
    try:
        yield count
    finally:
        stop.set()
        thread.join()


def _attempt(call: Callable[[], str]) -> str:
    """A call's answer; a refusal or a vanished file is a fine answer under attack."""
    try:
        return call()
    except (files_server.PathRefused, OSError) as exc:
        return f"refused: {exc}"


@pytest.fixture
def scene(tmp_path: Path) -> dict[str, Path]:
    drafts, outside = tmp_path / "drafts", tmp_path / "outside"
    (drafts / "d").mkdir(parents=True)
    outside.mkdir()
    (drafts / "d" / "file.txt").write_text("inside\n")
    (outside / "file.txt").write_text("OUTSIDE SECRET\n")
    (outside / "only-outside.txt").write_text("OUTSIDE SECRET\n")
    (drafts / ".swap").symlink_to(outside, target_is_directory=True)
    return {"drafts": drafts, "outside": outside, "d": drafts / "d", "swap": drafts / ".swap"}


def test_a_folder_swapped_for_a_link_never_lets_reads_reach_outside(
    scene: dict[str, Path],
) -> None:
    grants = FolderGrants([(scene["drafts"], True)])
    seen: list[str] = []
    with _swapping(scene["d"], scene["swap"]) as swaps:
        for _ in range(ROUNDS):
            seen.append(_attempt(lambda: files_server.read_file(grants, "drafts/d/file.txt")))
            seen.append(_attempt(lambda: files_server.list_dir(grants, "drafts/d")))
            seen.append(_attempt(lambda: files_server.search(grants, "secret", "drafts")))
    assert swaps[0] > 0
    leaked = [s for s in seen if "OUTSIDE" in s or "only-outside" in s]
    assert leaked == [], f"{len(leaked)} of {len(seen)} answers showed the outside"
    # The race was real: some calls saw the folder, some saw the link and were refused.
    assert any(s.startswith("inside") for s in seen)


def test_a_folder_swapped_for_a_link_never_lets_writes_or_moves_land_outside(
    scene: dict[str, Path],
) -> None:
    grants = FolderGrants([(scene["drafts"], True)])
    outside_before = {p.name: p.read_text() for p in scene["outside"].iterdir()}
    with _swapping(scene["d"], scene["swap"]) as swaps:
        for i in range(ROUNDS):
            _attempt(partial(files_server.write_file, grants, "drafts/d/file.txt", "overwritten"))
            _attempt(partial(files_server.write_file, grants, f"drafts/d/new-{i}.txt", "planted"))
            files_server.write_file(grants, f"drafts/src-{i}.txt", "moved")
            _attempt(
                partial(files_server.move, grants, f"drafts/src-{i}.txt", f"drafts/d/m-{i}.txt")
            )
    assert swaps[0] > 0
    outside_after = {p.name: p.read_text() for p in scene["outside"].iterdir()}
    assert outside_after == outside_before
    # The real folder is whichever of the two names is not the link.
    written = os.listdir(scene["swap"] if scene["d"].is_symlink() else scene["d"])
    assert any(name.startswith("new-") for name in written)


def test_a_file_swapped_for_a_fifo_never_blocks_a_read(tmp_path: Path) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "data.txt").write_text("hello\n")
    os.mkfifo(notes / ".pipe")
    grants = FolderGrants([(notes, False)])
    seen: list[str] = []

    def read_many() -> None:
        for _ in range(ROUNDS):
            seen.append(_attempt(lambda: files_server.read_file(grants, "notes/data.txt")))

    reader = threading.Thread(target=read_many, daemon=True)
    with _swapping(notes / "data.txt", notes / ".pipe"):
        reader.start()
        # A watchdog, not a pace: a read stuck on the FIFO never ends on its own.
        reader.join(timeout=60)
    blocked = reader.is_alive()
    if blocked:
        for name in ("data.txt", ".pipe"):  # a writer's open releases a stuck reader
            with suppress(OSError):
                os.close(os.open(notes / name, os.O_WRONLY | os.O_NONBLOCK))
        reader.join()
    assert not blocked, f"read_file blocked on a FIFO after {len(seen)} reads"
    assert len(seen) == ROUNDS
    assert all(s == "hello\n" or "not a regular file" in s for s in seen)
    # Which of the two each read met depends on how the threads were scheduled; once the
    # attack ends and the file is back, a read answers with it.
    if stat.S_ISFIFO(os.stat(notes / "data.txt").st_mode):
        _exchange(notes / "data.txt", notes / ".pipe")
    assert files_server.read_file(grants, "notes/data.txt") == "hello\n"
