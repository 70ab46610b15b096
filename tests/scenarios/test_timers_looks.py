"""Between whole passes the approval clock looks only at the items made since its last look,
and a whole pass still comes when a moment is due, when the skills are loaded again, and at
least every `whole_every`: a server with many waiting items does not read them all every
`interval`, and no item is left without its time-out.

In-process: SqlStore on SQLite, the scripted model server, recording channels
(tests/peers/triggers.py), an injected clock.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from pizzabot.agent.model import ItemStatus
from pizzabot.agent.policy import Principal
from pizzabot.agent.skills import Skill
from pizzabot.agent.testing.scripts import Reply, ToolCall, last_tool_result
from pizzabot.agent.timers import WHOLE_EVERY
from tests.peers.item_reads import count_item_reads
from tests.peers.triggers import Harness, skill_dict

MAIL = {"to": "ann@example.com", "subject": "Quote"}


def mail_once(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Reply:
    if last_tool_result(messages) is None:
        return Reply(text="Mailing.", tool_calls=[ToolCall("crm__send_email", dict(MAIL))])
    return Reply(text="Done.")


async def waiting_item(h: Harness, text: str = "mail") -> str:
    run = await h.runs.start("test", text, trigger="test", by=Principal.owner("api"))
    await h.drive()
    return (await h.action_item(run.id)).id


async def test_a_look_between_whole_passes_reads_only_the_new_items(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tools = {"crm.send_email": {"policy": "ask", "timeout": "1h"}}
    async with Harness(tmp_path, mail_once, tools=tools) as h:
        for k in range(4):
            await waiting_item(h, f"mail {k}")
        reads = count_item_reads(h.store, monkeypatch)
        h.clock.advance(seconds=30)
        assert await h.timers.tick(new_only=True) == []  # the first look is whole
        assert reads == [4]

        h.clock.advance(seconds=30)
        newest = await waiting_item(h, "mail 4")
        h.clock.advance(seconds=30)
        reads.clear()
        assert await h.timers.tick(new_only=True) == []
        assert reads == [1]  # the new item alone; the others' time-out is already known
        assert h.timers.next_due == pytest.approx(3600 - 90)

        h.clock.advance(seconds=WHOLE_EVERY)
        reads.clear()
        assert await h.timers.tick(new_only=True) == []
        assert reads == [5]  # the whole pass that comes at least every `whole_every`
        assert (await h.store.get_item(newest)).status is ItemStatus.PENDING


async def test_a_time_out_added_by_a_reloaded_skill_reaches_the_items_already_waiting(
    tmp_path: Path,
) -> None:
    async with Harness(tmp_path, mail_once) as h:
        item_id = await waiting_item(h)
        h.clock.advance(seconds=30)
        assert await h.timers.tick(new_only=True) == [] and h.timers.next_due is None

        h.clock.advance(minutes=2)
        tools = {"crm.send_email": {"policy": "ask", "timeout": "1m"}}
        h.ctx.skills.replace(
            {"test": Skill.model_validate(skill_dict(h.model.openai_base, tools=tools))}
        )
        actions = await h.timers.tick(new_only=True)

        assert [(a.item_id, a.kind) for a in actions] == [(item_id, "expired")]
        assert (await h.store.get_item(item_id)).status is ItemStatus.EXPIRED


async def test_an_item_committed_after_a_later_look_expires_at_the_next_whole_pass(
    tmp_path: Path,
) -> None:
    """An item stamped more than a second before a look it was not committed for (another
    process's slow transaction) is missed by the looks for new items; the next whole pass
    acts on it, at most `whole_every` later."""
    tools = {"crm.send_email": {"policy": "ask", "timeout": "1m"}}
    async with Harness(tmp_path, mail_once, tools=tools) as h:
        start = h.clock()
        assert await h.timers.tick(new_only=True) == []
        h.clock.set(start + timedelta(seconds=10))
        assert await h.timers.tick(new_only=True) == []

        h.clock.set(start + timedelta(seconds=5))  # stamped before that look
        late = await waiting_item(h)
        h.clock.set(start + timedelta(minutes=2))
        assert await h.timers.tick(new_only=True) == []
        assert (await h.store.get_item(late)).status is ItemStatus.PENDING

        h.clock.set(start + timedelta(seconds=WHOLE_EVERY))
        actions = await h.timers.tick(new_only=True)
        assert [(a.item_id, a.kind) for a in actions] == [(late, "expired")]
