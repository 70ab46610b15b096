"""The approval clock reads the pending items a page at a time: every waiting item is looked
at however many wait, and no read holds more than a page of them.

In-process: SqlStore on SQLite, the scripted model server, recording channels
(tests/peers/triggers.py); the items share one moment, so the pages turn on their ids.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pizzabot.agent import timers
from pizzabot.agent.model import Box, ItemStatus, RunStatus
from pizzabot.agent.policy import Principal
from pizzabot.agent.testing.scripts import Reply, ToolCall, last_tool_result
from tests.peers.item_reads import count_item_reads
from tests.peers.triggers import Harness

MAIL = {"to": "ann@example.com", "subject": "Quote"}


def mail_once(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Reply:
    if last_tool_result(messages) is None:
        return Reply(text="Mailing.", tool_calls=[ToolCall("crm__send_email", dict(MAIL))])
    return Reply(text="Done.")


async def test_a_pass_expires_every_item_over_several_pages(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(timers, "PAGE", 2)
    tools = {"crm.send_email": {"policy": "ask", "timeout": "1h"}}
    async with Harness(tmp_path, mail_once, tools=tools) as h:
        for k in range(5):
            await h.runs.start("test", f"mail {k}", trigger="test", by=Principal.owner("api"))
        await h.drive()
        assert len(await h.store.list_items(box=Box.ACTION, status=ItemStatus.PENDING)) == 5

        reads = count_item_reads(h.store, monkeypatch)
        h.clock.advance(minutes=61)
        actions = await h.timers.tick()

        assert sorted(a.kind for a in actions) == ["expired"] * 5
        assert reads == [2, 2, 1]  # three pages, none larger than PAGE
        assert await h.store.list_items(box=Box.ACTION, status=ItemStatus.PENDING) == []
        await h.drive()
        statuses = {r.status for r in await h.store.list_runs(limit=10)}
        assert statuses == {RunStatus.DONE}
