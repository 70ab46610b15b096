"""The example skills people start from complete a run: each example's file as shipped, with
only its model swapped for the scripted one and its server started from this environment's
install (not `uvx`/`npx -y`, which would download it), served by a real `pizzabot serve`;
its asks are answered through the API.

- file-tidy: the model lists the Downloads folder (auto), then moves a file into the sorted
  folder (asked); approved, the reference filesystem server really moves it.
- web-research: the model asks to fetch an address with a query string (asked); a person
  rejects it with a reason the model reads; then it tries a local address, which the skill's
  rule denies without asking. Nothing is fetched: no test reaches the network.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from pizzabot.agent.testing.model_server import ScriptedModelServer
from pizzabot.agent.testing.scripts import Reply, ToolCall, turns
from tests.peers.required import NPM_BIN
from tests.peers.server import ServerProcess
from tests.waiting import eventually

EXAMPLES = Path(__file__).resolve().parents[2] / "manifests" / "examples"


def as_shipped(name: str, model_base: str, server: dict[str, Any]) -> dict[str, Any]:
    """The example's file, its model the scripted one and its one server `server`."""
    skill: dict[str, Any] = yaml.safe_load((EXAMPLES / f"{name}.yaml").read_text())
    skill["model"] = "openai/scripted"
    skill["model_options"] = {"api_base": model_base, "api_key": "x"}
    (only,) = skill["mcp_servers"]
    skill["mcp_servers"] = {only: server}
    skill.pop("schedules", None)
    return skill


async def served_run(
    tmp_path: Path, skill: dict[str, Any], model: ScriptedModelServer, env: dict[str, str]
) -> tuple[ServerProcess, str]:
    skills = tmp_path / "skills"
    skills.mkdir()
    (skills / f"{skill['name']}.yaml").write_text(yaml.safe_dump(skill))
    server = ServerProcess(data_dir=tmp_path / "data", skills_dir=skills, env=env)
    await server.start()
    async with server.client() as c:
        r = await c.post("/api/runs", json={"skill": skill["name"], "input": "go"})
        assert r.status_code == 201, r.text
    return server, str(r.json()["id"])


async def pending_item(server: ServerProcess, run_id: str) -> dict[str, Any]:
    async with server.client() as c:

        async def found() -> dict[str, Any] | None:
            items = (await c.get("/api/inbox", params={"box": "action"})).json()["items"]
            return next((i for i in items if i["run_id"] == run_id), None)

        return await eventually(found, what="the card", context=server.log)


async def finished(server: ServerProcess, run_id: str) -> dict[str, Any]:
    async with server.client() as c:

        async def done() -> dict[str, Any] | None:
            run = (await c.get(f"/api/runs/{run_id}")).json()
            return run if run["status"] in {"done", "failed", "cancelled"} else None

        return await eventually(done, what="the run to end", timeout=90, context=server.log)


@pytest.mark.npm
async def test_file_tidy_moves_a_download_once_approved(tmp_path: Path) -> None:
    downloads, sorted_ = tmp_path / "Downloads", tmp_path / "sorted"
    downloads.mkdir()
    sorted_.mkdir()
    (downloads / "invoice.txt").write_text("Invoice 42")
    move = {"source": str(downloads / "invoice.txt"), "destination": str(sorted_ / "invoice.txt")}
    script = turns(
        Reply(tool_calls=[ToolCall("files__list_directory", {"path": str(downloads)})]),
        Reply(tool_calls=[ToolCall("files__move_file", move)]),
        Reply(text="Moved invoice.txt into sorted."),
    )
    files = {
        "command": str(NPM_BIN / "mcp-server-filesystem"),
        "args": [str(downloads), str(sorted_)],
    }
    async with ScriptedModelServer(script) as model:
        skill = as_shipped("file-tidy", model.openai_base, files)
        env = {"PATH": f"{NPM_BIN}:{Path(sys.executable).parent}:/usr/bin:/bin"}
        server, run_id = await served_run(tmp_path, skill, model, env)
        try:
            item = await pending_item(server, run_id)
            assert item["tool"] == "files.move_file" and item["args"] == move
            assert (downloads / "invoice.txt").exists()  # nothing moved before a person said so
            async with server.client() as c:
                r = await c.post(f"/api/items/{item['id']}/decision", json={"decision": "approve"})
                assert r.status_code == 200, r.text
            run = await finished(server, run_id)
        finally:
            server.stop()
    assert run["status"] == "done", run
    assert (sorted_ / "invoice.txt").read_text() == "Invoice 42"
    assert not (downloads / "invoice.txt").exists()


async def test_web_research_asks_before_fetching_and_never_fetches_this_machine(
    tmp_path: Path,
) -> None:
    script = turns(
        Reply(tool_calls=[ToolCall("fetch__fetch", {"url": "https://example.com/?q=my+notes"})]),
        Reply(tool_calls=[ToolCall("fetch__fetch", {"url": "http://127.0.0.1:8080/admin"})]),
        Reply(text="I could not fetch anything."),
    )
    fetch = {"command": str(Path(sys.executable).parent / "mcp-server-fetch")}
    async with ScriptedModelServer(script) as model:
        skill = as_shipped("web-research", model.openai_base, fetch)
        server, run_id = await served_run(tmp_path, skill, model, {})
        try:
            item = await pending_item(server, run_id)
            assert item["tool"] == "fetch.fetch"
            assert item["args"] == {"url": "https://example.com/?q=my+notes"}
            async with server.client() as c:
                body = {"decision": "reject", "reason": "no query strings"}
                r = await c.post(f"/api/items/{item['id']}/decision", json=body)
                assert r.status_code == 200, r.text
            run = await finished(server, run_id)
        finally:
            server.stop()
    assert run["status"] == "done", run
    events = json.dumps(run["events"])
    assert "no query strings" in events
    assert "addresses on this machine or its private network are not fetched" in events
