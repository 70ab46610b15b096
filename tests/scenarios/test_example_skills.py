"""The example skills people start from (manifests/examples) on real third-party MCP servers:
each loads, and where its server installs from a registry, the server really starts, lists
its tools, and the skill's rules fit those tools' arguments.

- web-research: `mcp-server-fetch` from PyPI (a pinned test dependency, so started from this
  environment rather than through `uvx`, which would download it).
- file-tidy: `@modelcontextprotocol/server-filesystem` from npm (`.ci/install-mcp-servers`,
  started from there rather than through `npx -y`), with two granted folders of the test's
  own. Every tool it lists has its own policy in the skill: none falls to `"*": deny` unseen.
- crm-log: HubSpot's hosted server behind OAuth, and slack-summary: korotovsky's
  `slack-mcp-server`; their runs are tested against local peers in
  tests/e2e/test_example_runs_slack.py, and here their policies are checked.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from pizzabot.agent.skills import HttpServer, Skill, StdioServer, load_skills
from pizzabot.agent.tools_mcp import ToolHub
from tests.peers.required import NPM_BIN

EXAMPLES = Path(__file__).resolve().parents[2] / "manifests" / "examples"


def example(name: str) -> Skill:
    report = load_skills(EXAMPLES)
    assert report.errors == []
    return report.skills[name]


def with_server(skill: Skill, name: str, server: StdioServer) -> Skill:
    return skill.model_copy(update={"mcp_servers": {name: server}})


async def test_web_research_starts_the_fetch_server_and_its_rules_fit() -> None:
    skill = example("web-research")
    fetch = skill.mcp_servers["fetch"]
    assert isinstance(fetch, StdioServer) and fetch.command == "uvx"
    installed = StdioServer(command=str(Path(sys.executable).parent / "mcp-server-fetch"))
    hub = ToolHub(env={"PATH": os.environ["PATH"]})
    try:
        specs = await hub.list_tools(with_server(skill, "fetch", installed))  # checks the rules
    finally:
        await hub.aclose()
    [spec] = specs
    assert spec.name == "fetch" and "url" in spec.schema["properties"]
    assert skill.rule("fetch.fetch").policy == "ask"


@pytest.mark.npm
async def test_file_tidy_starts_the_filesystem_server_on_its_granted_folders(
    tmp_path: Path,
) -> None:
    skill = example("file-tidy")
    files = skill.mcp_servers["files"]
    assert isinstance(files, StdioServer) and files.command == "npx"
    assert files.args[1].startswith("@modelcontextprotocol/server-filesystem@")
    granted = [tmp_path / "Downloads", tmp_path / "sorted"]
    for folder in granted:
        folder.mkdir()
    (granted[0] / "invoice.txt").write_text("Invoice 42")
    installed = StdioServer(
        command=str(NPM_BIN / "mcp-server-filesystem"), args=[str(f) for f in granted]
    )
    hub = ToolHub(env={"PATH": f"{NPM_BIN}:{os.environ['PATH']}"})
    tidy = with_server(skill, "files", installed)
    try:
        specs = await hub.list_tools(tidy)
        listed = await hub.call(tidy, "files", "list_directory", {"path": str(granted[0])})
        outside = await hub.call(tidy, "files", "list_directory", {"path": str(tmp_path)})
    finally:
        await hub.aclose()
    names = {s.name for s in specs}
    assert {"read_text_file", "list_directory", "move_file", "write_file"} <= names
    unlisted = {n for n in names if f"files.{n}" not in skill.tools}
    assert unlisted == set(), f"tools the example gives no policy: {unlisted}"
    assert skill.rule("files.move_file").policy == "ask"
    assert skill.rule("files.read_text_file").policy == "auto"
    assert not listed.is_error and "invoice.txt" in listed.text
    assert outside.is_error  # only the granted folders


def test_crm_log_connects_with_oauth() -> None:
    skill = example("crm-log")
    crm = skill.mcp_servers["crm"]
    assert isinstance(crm, HttpServer) and crm.auth == "oauth"
    assert crm.client_id == "${HUBSPOT_CLIENT_ID}"
    assert crm.client_secret == "${HUBSPOT_CLIENT_SECRET}"
    policies = {t: skill.rule(f"crm.{t}").policy for t in ("search_crm_objects", "get_crm_objects")}
    assert policies == {"search_crm_objects": "auto", "get_crm_objects": "auto"}
    assert skill.rule("crm.manage_crm_objects").policy == "ask"
    assert skill.rule("crm.delete_crm_objects").policy == "deny"


def test_slack_summary_reads_at_once_asks_to_post_and_refuses_the_rest() -> None:
    skill = example("slack-summary")
    slack = skill.mcp_servers["slack"]
    assert isinstance(slack, StdioServer) and slack.args[1] == "slack-mcp-server@1.3.0"
    assert slack.pass_env == ["SLACK_MCP_XOXB_TOKEN"]
    assert skill.rule("slack.conversations_history").policy == "auto"
    assert skill.rule("slack.conversations_add_message").policy == "ask"
    for other in ("conversations_join", "conversations_mark", "usergroups_create"):
        assert skill.rule(f"slack.{other}").policy == "deny"
