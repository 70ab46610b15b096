"""Granted folders through the whole engine: a skill's folders become the built-in `files`
MCP server, serving exactly those folders; with none granted there is no file tool."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.peers.stack import Reply, Stack, ToolCall

PLAN = [
    ("files__read_file", {"path": "notes/todo.md"}),
    ("files__read_file", {"path": "notes/../secret.txt"}),
    ("files__write_file", {"path": "notes/new.md", "content": "nope"}),
    ("files__write_file", {"path": "drafts/reply.md", "content": "Dear Ann"}),
]


def follow_plan(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Reply:
    names = sorted(t["function"]["name"] for t in tools)
    results = [m["content"] for m in messages if m["role"] == "tool"]
    if len(results) < len(PLAN) and "files__read_file" in names:
        name, args = PLAN[len(results)]
        return Reply(tool_calls=[ToolCall(name, args)])
    return Reply(text="\n---\n".join([f"tools: {' '.join(names)}", *results]))


async def test_a_skill_reads_and_writes_only_what_it_was_granted(tmp_path: Path) -> None:
    notes, drafts = tmp_path / "notes", tmp_path / "drafts"
    notes.mkdir()
    drafts.mkdir()
    (notes / "todo.md").write_text("call Ann")
    (tmp_path / "secret.txt").write_text("the password")
    skill = {
        "folders": [{"path": str(notes)}, {"path": str(drafts), "write": True}],
        "tools": {"files.*": "auto"},
    }
    async with Stack(tmp_path / "stack", script=follow_plan, skill=skill) as st:
        run = await st.start_run("test", "tidy my notes")
        done = await st.wait_run(run["id"], {"done"})
    tools_line, read, escape, ro_write, rw_write = done["result"].split("\n---\n")
    assert "files__read_file" in tools_line and "files__write_file" in tools_line
    assert "call Ann" in read
    assert "outside the granted folders" in escape and "the password" not in done["result"]
    assert "read-only" in ro_write and not (notes / "new.md").exists()
    assert "Error" not in rw_write
    assert (drafts / "reply.md").read_text() == "Dear Ann"
    results = [e["data"] for e in done["events"] if e["kind"] == "tool_result"]
    assert [r["is_error"] for r in results] == [False, True, True, False]


async def test_without_folders_there_is_no_file_tool(tmp_path: Path) -> None:
    async with Stack(tmp_path, script=follow_plan) as st:
        run = await st.start_run("test", "tidy my notes")
        done = await st.wait_run(run["id"], {"done"})
    assert "files__" not in done["result"].split("\n---\n")[0]
