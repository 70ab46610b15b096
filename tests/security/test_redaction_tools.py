"""A tool's error is stored without the server's secrets or anything shaped like a key; a
tool's normal result keeps its content (the model needs it as it is) but not the server's
own secrets.

The engine runs in-process with the real stdio test tools and the scripted model server;
the tool that fails says "the CRM is down", which here stands for a secret the engine was
given, so the story needs no tool written to leak.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pizzabot.agent.policy import Principal
from pizzabot.agent.redaction import Redactor
from pizzabot.agent.testing.scripts import Reply, ToolCall, last_tool_result
from tests.peers.inproc import InProcess

LEAKED = "the CRM is down"
SHAPED = "ghp_abcdefghijklmnopqrstuvwxyz0123456789"


def fail_then_look_up(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Reply:
    result = last_tool_result(messages)
    if result is None:
        return Reply(tool_calls=[ToolCall("crm__fail", {})])
    if "crm__lookup" not in json.dumps(messages):
        return Reply(tool_calls=[ToolCall("crm__lookup", {"query": f"{SHAPED} {LEAKED}"})])
    return Reply(text="done")


async def test_tool_errors_and_results_are_stored_without_the_servers_secrets(
    tmp_path: Path,
) -> None:
    async with InProcess(tmp_path, fail_then_look_up) as h:
        h.engine.redact = Redactor.of(LEAKED)
        run = await h.runs.start("test", "look", by=Principal.owner("api"))
        await h.wait(run.id, {"done"})

        results = [e.data for e in await h.store.events(run.id) if e.data.get("call_id")]
        texts = [d["text"] for d in results if "text" in d]

    [failed, looked_up] = texts
    assert LEAKED not in failed and failed.endswith("fail: [redacted]")
    assert LEAKED not in looked_up and "[redacted]" in looked_up
    assert SHAPED in looked_up  # a result's content is the tool's, shapes and all
