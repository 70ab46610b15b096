"""A read-only folder granted inside a writable one stays read-only: the most specific grant
decides, whichever name the model uses for the place and whichever tool it tries."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from pizzabot.tools import files as files_server
from pizzabot.tools.files import FolderGrants, PathRefused


@pytest.fixture
def drafts(tmp_path: Path) -> Path:
    """drafts/ (writable) holding locked/ (granted read-only on its own)."""
    drafts = tmp_path / "drafts"
    (drafts / "locked").mkdir(parents=True)
    (drafts / "locked" / "keep.txt").write_text("original\n")
    (drafts / "mine.txt").write_text("mine\n")
    return drafts


def _state(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): p.read_text() for p in sorted(folder.rglob("*")) if p.is_file()
    }


@pytest.mark.parametrize("prefix", ["drafts/locked", "locked"])
def test_no_tool_writes_into_a_read_only_folder_nested_in_a_writable_one(
    drafts: Path, prefix: str
) -> None:
    grants = FolderGrants([(drafts, True), (drafts / "locked", False)])
    before = _state(drafts)
    attempts: list[Callable[[], str]] = [
        lambda: files_server.write_file(grants, f"{prefix}/evil.txt", "pwned"),
        lambda: files_server.write_file(grants, f"{prefix}/keep.txt", "pwned"),
        lambda: files_server.write_file(grants, f"{prefix}/new/evil.txt", "pwned"),
        lambda: files_server.write_file(grants, str(drafts / "locked" / "evil.txt"), "pwned"),
        lambda: files_server.move(grants, f"{prefix}/keep.txt", "drafts/stolen.txt"),
        lambda: files_server.move(grants, "drafts/mine.txt", f"{prefix}/mine.txt"),
        lambda: files_server.move(grants, "drafts/locked", "drafts/unlocked"),
    ]
    for attempt in attempts:
        with pytest.raises(PathRefused, match=r"read-only|granted folder"):
            attempt()
    assert _state(drafts) == before
    assert sorted(os.listdir(drafts / "locked")) == ["keep.txt"]
    # The rest of the writable folder is still writable, and the listing says which is which.
    files_server.write_file(grants, "drafts/ok.txt", "fine")
    assert "drafts/locked/  (granted read-only)" in files_server.list_dir(grants, "drafts")


def test_a_writable_folder_nested_in_a_read_only_one_is_writable(tmp_path: Path) -> None:
    notes = tmp_path / "notes"
    (notes / "inbox").mkdir(parents=True)
    grants = FolderGrants([(notes, False), (notes / "inbox", True)])
    assert files_server.write_file(grants, "notes/inbox/a.md", "a") == "wrote 1 bytes to inbox/a.md"
    with pytest.raises(PathRefused, match="read-only"):
        files_server.write_file(grants, "notes/a.md", "a")
    assert sorted(os.listdir(notes)) == ["inbox"]


async def test_the_real_server_refuses_writes_into_the_nested_read_only_folder(
    drafts: Path,
) -> None:
    from mcp.client import Client
    from mcp.client.stdio import StdioServerParameters

    params = StdioServerParameters(
        command=sys.executable,
        args=[
            "-m",
            "pizzabot.tools.files",
            "--grant-write",
            str(drafts),
            "--grant",
            str(drafts / "locked"),
        ],
    )
    async with Client(params) as client:
        result = await client.call_tool(
            "write_file", {"path": "drafts/locked/evil.txt", "content": "pwned"}
        )
    assert result.is_error
    assert "granted read-only" in "".join(getattr(c, "text", "") for c in result.content)
    assert sorted(os.listdir(drafts / "locked")) == ["keep.txt"]
