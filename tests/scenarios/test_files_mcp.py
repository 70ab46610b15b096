"""The granted-folders server: the path rules alone, then the real server over stdio."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from pizzabot.tools import files as files_server
from pizzabot.tools.files import FolderGrants, PathRefused
from pizzabot.tools.files.grants import FolderGrantsRefused

if TYPE_CHECKING:
    from mcp.client.stdio import StdioServerParameters
    from mcp_types import CallToolResult

MAIN = Path(__file__).resolve().parents[2]


@pytest.fixture
def tree(tmp_path: Path) -> dict[str, Path]:
    """notes/ (read-only), drafts/ (writable), outside/ (not granted), plus links out."""
    notes, drafts, outside = tmp_path / "notes", tmp_path / "drafts", tmp_path / "outside"
    for d in (notes, drafts, outside):
        d.mkdir()
    (notes / "todo.md").write_text("buy flour\nfeed the cat\n")
    (notes / "sub").mkdir()
    (notes / "sub" / "deep.txt").write_text("the Flour is in the cellar\n")
    (outside / "secret.txt").write_text("s3cret\n")
    (notes / "leak.txt").symlink_to(outside / "secret.txt")
    (notes / "linked").symlink_to(outside, target_is_directory=True)
    (drafts / "old.md").write_text("draft\n")
    return {"notes": notes, "drafts": drafts, "outside": outside}


@pytest.fixture
def grants(tree: dict[str, Path]) -> FolderGrants:
    return FolderGrants([(tree["notes"], False), (tree["drafts"], True)])


# -- the path rules ------------------------------------------------------------------------


def test_relative_and_absolute_paths_inside_are_read(
    grants: FolderGrants, tree: dict[str, Path]
) -> None:
    assert files_server.read_file(grants, "notes/todo.md") == "buy flour\nfeed the cat\n"
    deep = str(tree["notes"] / "sub" / "deep.txt")
    assert files_server.read_file(grants, deep) == "the Flour is in the cellar\n"
    assert files_server.read_file(grants, "notes/sub/../todo.md").startswith("buy flour")
    assert grants.locate("drafts/a/./b.md") == (grants.folders[1], ("a", "b.md"))


@pytest.mark.parametrize("path", ["notes/../outside/secret.txt", "notes/sub/../../outside"])
def test_dotdot_traversal_is_refused(grants: FolderGrants, path: str) -> None:
    with pytest.raises(PathRefused, match="outside the granted folders"):
        files_server.read_file(grants, path)
    with pytest.raises(PathRefused, match="does not start with a granted folder name"):
        files_server.read_file(grants, "../outside/secret.txt")


def test_dotdot_out_names_the_granted_folders(grants: FolderGrants) -> None:
    with pytest.raises(PathRefused, match=r"is outside the granted folders: notes/ \(read-only\)"):
        files_server.read_file(grants, "notes/../outside/secret.txt")


def test_absolute_path_elsewhere_is_refused(grants: FolderGrants, tree: dict[str, Path]) -> None:
    for path in ("/etc/passwd", str(tree["outside"] / "secret.txt"), str(tree["notes"].parent)):
        with pytest.raises(PathRefused, match="outside the granted folders"):
            files_server.read_file(grants, path)


def test_unknown_folder_name_is_refused(grants: FolderGrants) -> None:
    with pytest.raises(PathRefused, match="does not start with a granted folder name"):
        files_server.read_file(grants, "outside/secret.txt")


def test_symlinked_file_pointing_out_is_refused(grants: FolderGrants) -> None:
    with pytest.raises(PathRefused, match="is a symbolic link; links are not followed"):
        files_server.read_file(grants, "notes/leak.txt")


def test_symlinked_parent_folder_pointing_out_is_refused(grants: FolderGrants) -> None:
    with pytest.raises(PathRefused, match="'notes/linked' is a symbolic link"):
        files_server.read_file(grants, "notes/linked/secret.txt")
    with pytest.raises(PathRefused, match="'notes/linked' is a symbolic link"):
        files_server.list_dir(grants, "notes/linked")


def test_a_link_inside_the_grants_is_not_followed_either(
    grants: FolderGrants, tree: dict[str, Path]
) -> None:
    (tree["drafts"] / "todo-link.md").symlink_to(tree["notes"] / "todo.md")
    with pytest.raises(PathRefused, match="is a symbolic link"):
        files_server.read_file(grants, "drafts/todo-link.md")
    with pytest.raises(PathRefused, match="is a symbolic link"):
        files_server.write_file(grants, "drafts/todo-link.md", "x")
    assert (tree["notes"] / "todo.md").read_text() == "buy flour\nfeed the cat\n"


def test_write_without_grant_is_refused(grants: FolderGrants) -> None:
    assert files_server.read_file(grants, "notes/todo.md")  # readable ...
    with pytest.raises(PathRefused, match=r"'notes/todo\.md' is granted read-only"):
        files_server.write_file(grants, "notes/todo.md", "x")  # ... but not writable
    with pytest.raises(PathRefused, match="granted read-only"):
        files_server.write_file(grants, "notes/new/deeper.md", "x")
    assert not (grants.folders[0].root / "new").exists()


def test_write_with_grant_lands_atomically(grants: FolderGrants, tree: dict[str, Path]) -> None:
    out = files_server.write_file(grants, "drafts/a/b/new.md", "héllo\n")
    assert out == "wrote 7 bytes to drafts/a/b/new.md"
    assert (tree["drafts"] / "a/b/new.md").read_text() == "héllo\n"
    files_server.write_file(grants, "drafts/old.md", "replaced")
    assert (tree["drafts"] / "old.md").read_text() == "replaced"
    files_server.write_file(grants, str(tree["drafts"] / "abs.md"), "by absolute path")
    assert (tree["drafts"] / "abs.md").read_text() == "by absolute path"
    # No temp files are left behind.
    assert sorted(p.name for p in tree["drafts"].iterdir()) == ["a", "abs.md", "old.md"]


def test_write_keeps_an_existing_files_mode(grants: FolderGrants, tree: dict[str, Path]) -> None:
    (tree["drafts"] / "old.md").chmod(0o600)
    files_server.write_file(grants, "drafts/old.md", "replaced")
    files_server.write_file(grants, "drafts/fresh.md", "new")
    assert (tree["drafts"] / "old.md").stat().st_mode & 0o777 == 0o600
    assert (tree["drafts"] / "fresh.md").stat().st_mode & 0o777 == 0o644


def test_write_through_a_link_out_of_a_writable_folder_is_refused(
    grants: FolderGrants, tree: dict[str, Path]
) -> None:
    (tree["drafts"] / "out").symlink_to(tree["outside"], target_is_directory=True)
    with pytest.raises(PathRefused, match="'drafts/out' is a symbolic link"):
        files_server.write_file(grants, "drafts/out/pwned.txt", "x")
    with pytest.raises(PathRefused, match="'drafts/out' is a symbolic link"):
        files_server.write_file(grants, "drafts/out/new/pwned.txt", "x")
    assert sorted(os.listdir(tree["outside"])) == ["secret.txt"]


def test_move_across_grants(tmp_path: Path, tree: dict[str, Path]) -> None:
    archive = tmp_path / "archive"
    archive.mkdir()
    grants = FolderGrants([(tree["notes"], False), (tree["drafts"], True), (archive, True)])
    assert files_server.move(grants, "drafts/old.md", "archive/2024/old.md") == (
        "moved drafts/old.md to archive/2024/old.md"
    )
    assert (archive / "2024/old.md").read_text() == "draft\n"
    assert not (tree["drafts"] / "old.md").exists()
    # Out of a read-only grant, into a read-only grant, or out of the grants: all refused.
    with pytest.raises(PathRefused, match="granted read-only"):
        files_server.move(grants, "notes/todo.md", "drafts/todo.md")
    with pytest.raises(PathRefused, match="granted read-only"):
        files_server.move(grants, "archive/2024/old.md", "notes/old.md")
    with pytest.raises(PathRefused, match="outside the granted folders"):
        files_server.move(grants, "archive/2024/old.md", str(tree["outside"] / "old.md"))
    assert (tree["notes"] / "todo.md").exists()
    assert (archive / "2024/old.md").exists()


def test_move_never_overwrites_and_never_moves_a_granted_folder(
    grants: FolderGrants, tree: dict[str, Path]
) -> None:
    files_server.write_file(grants, "drafts/new.md", "new")
    with pytest.raises(PathRefused, match="already exists"):
        files_server.move(grants, "drafts/new.md", "drafts/old.md")
    with pytest.raises(PathRefused, match="granted folder"):
        files_server.move(grants, "drafts", "drafts/inner")
    files_server.write_file(grants, "drafts/box/a.md", "a")
    with pytest.raises(PathRefused, match="into itself"):
        files_server.move(grants, "drafts/box", "drafts/box/inner/box")
    assert (
        files_server.move(grants, "drafts/box", "drafts/crate")
        == "moved drafts/box to drafts/crate"
    )
    assert (tree["drafts"] / "crate/a.md").read_text() == "a"


def test_grants_must_exist_and_same_names_get_suffixes(tmp_path: Path) -> None:
    with pytest.raises(FolderGrantsRefused, match="not an existing folder"):
        FolderGrants([(tmp_path / "missing", False)])
    (tmp_path / "a" / "notes").mkdir(parents=True)
    (tmp_path / "b" / "notes").mkdir(parents=True)
    grants = FolderGrants([(tmp_path / "a/notes", False), (tmp_path / "b/notes", True)])
    assert [g.name for g in grants.folders] == ["notes", "notes-2"]
    files_server.write_file(grants, "notes-2/x.md", "x")
    assert (tmp_path / "b/notes/x.md").read_text() == "x"


def test_a_granted_folder_that_is_a_link_keeps_its_name(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "x.md").write_text("x")
    (tmp_path / "notes").symlink_to(tmp_path / "data", target_is_directory=True)
    grants = FolderGrants([(tmp_path / "notes", False)])
    assert files_server.read_file(grants, "notes/x.md") == "x"
    assert files_server.read_file(grants, str(tmp_path / "notes/x.md")) == "x"
    assert files_server.read_file(grants, str(tmp_path / "data/x.md")) == "x"


# -- the operations -----------------------------------------------------------------------


def test_read_is_capped_and_says_so(grants: FolderGrants, tree: dict[str, Path]) -> None:
    (tree["notes"] / "big.txt").write_text("a" * 100)
    text = files_server.read_file(grants, "notes/big.txt", max_bytes=10)
    assert text.startswith("a" * 10 + "\n[truncated: showed bytes 0-10 of 100")
    assert "offset=10" in text
    assert files_server.read_file(grants, "notes/big.txt", offset=95) == "aaaaa"


def test_read_refuses_folders_and_special_files(
    grants: FolderGrants, tree: dict[str, Path]
) -> None:
    os.mkfifo(tree["notes"] / "pipe")
    with pytest.raises(PathRefused, match="is not a regular file"):
        files_server.read_file(grants, "notes/pipe")
    with pytest.raises(PathRefused, match="is a folder: use list_dir"):
        files_server.read_file(grants, "notes/sub")
    with pytest.raises(PathRefused, match="is a folder: use list_dir"):
        files_server.read_file(grants, "notes")
    with pytest.raises(FileNotFoundError):
        files_server.read_file(grants, "notes/missing.md")


def test_search_finds_names_and_contents_but_not_through_links(grants: FolderGrants) -> None:
    out = files_server.search(grants, "flour")
    # A folder's own files come before its subfolders', in grant order.
    assert out.splitlines() == [
        "notes/todo.md:1: buy flour",
        "notes/sub/deep.txt:1: the Flour is in the cellar",
    ]
    assert files_server.search(grants, "*.md").splitlines() == ["notes/todo.md", "drafts/old.md"]
    assert files_server.search(grants, "deep", path="notes/sub").splitlines() == [
        "notes/sub/deep.txt"
    ]
    assert files_server.search(grants, "s3cret") == "no matches for 's3cret'"
    bounded = files_server.search(grants, "e", max_results=1).splitlines()
    assert len(bounded) == 2 and bounded[1].startswith("[stopped at 1 results")


def test_root_listing_shows_folders_with_access(
    grants: FolderGrants, tree: dict[str, Path]
) -> None:
    root = files_server.list_dir(grants, "")
    assert f"notes/  (read-only)  = {tree['notes']}" in root
    assert f"drafts/  (read-write)  = {tree['drafts']}" in root
    listing = files_server.list_dir(grants, "notes").splitlines()
    assert "notes/sub/" in listing
    assert "notes/todo.md  (23 bytes)" in listing
    assert "notes/leak.txt  (symbolic link; not followed)" in listing
    assert "notes/linked  (symbolic link; not followed)" in listing


def test_launch_args_map_skill_folders_to_flags() -> None:
    from pizzabot.agent.skills import Folder

    folders = [Folder(path="/n"), Folder(path="/d", write=True)]
    assert files_server.launch_args(folders) == [
        "-m", "pizzabot.tools.files", "--grant", "/n", "--grant-write", "/d"
    ]  # fmt: skip


# -- the real server over stdio -----------------------------------------------------------


def _params(*args: str) -> StdioServerParameters:
    from mcp.client.stdio import StdioServerParameters

    return StdioServerParameters(
        command=sys.executable, args=["-m", "pizzabot.tools.files", *args], cwd=str(MAIN)
    )


def _text(result: CallToolResult) -> str:
    return "\n".join(getattr(c, "text", "") for c in result.content)


async def test_read_only_server_over_stdio(tree: dict[str, Path]) -> None:
    from mcp.client import Client

    async with Client(_params("--grant", str(tree["notes"]))) as client:
        assert client.instructions is not None and str(tree["notes"]) in client.instructions
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert sorted(tools) == ["list_dir", "read_file", "search"]
        assert "'<folder>/<path inside it>'" in (tools["read_file"].description or "")
        assert tools["read_file"].input_schema["required"] == ["path"]

        ok = await client.call_tool("read_file", {"path": "notes/todo.md"})
        assert not ok.is_error
        assert _text(ok) == "buy flour\nfeed the cat\n"

        root = await client.call_tool("list_dir", {"path": ""})
        assert "notes/  (read-only)" in _text(root)

        bad = await client.call_tool("read_file", {"path": "notes/../outside/secret.txt"})
        assert bad.is_error
        assert "is outside the granted folders" in _text(bad)
        assert "s3cret" not in _text(bad)

        leak = await client.call_tool("read_file", {"path": "notes/leak.txt"})
        assert leak.is_error
        assert "is a symbolic link; links are not followed" in _text(leak)

        write = await client.call_tool("write_file", {"path": "notes/x.md", "content": "x"})
        assert write.is_error  # the tool does not exist here
        assert not (tree["notes"] / "x.md").exists()


async def test_writable_server_over_stdio(tree: dict[str, Path]) -> None:
    from mcp.client import Client

    params = _params("--grant", str(tree["notes"]), "--grant-write", str(tree["drafts"]))
    async with Client(params) as client:
        names = sorted(t.name for t in (await client.list_tools()).tools)
        assert names == ["list_dir", "move", "preview_write", "read_file", "search", "write_file"]

        wrote = await client.call_tool("write_file", {"path": "drafts/plan.md", "content": "go\n"})
        assert not wrote.is_error, _text(wrote)
        assert (tree["drafts"] / "plan.md").read_text() == "go\n"

        refused = await client.call_tool("write_file", {"path": "notes/plan.md", "content": "x"})
        assert refused.is_error
        assert "'notes/plan.md' is granted read-only" in _text(refused)
        assert not (tree["notes"] / "plan.md").exists()

        moved = await client.call_tool("move", {"src": "drafts/plan.md", "dst": "drafts/done.md"})
        assert not moved.is_error, _text(moved)
        assert sorted(os.listdir(tree["drafts"])) == ["done.md", "old.md"]
