"""Follow-ups: a finished run continues with its whole history when someone writes to it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pizzabot.agent.model import Approve, RunStatus
from pizzabot.agent.policy import Principal
from pizzabot.agent.testing.scripts import Reply, ToolCall, count_role, last_user_text
from tests.peers.triggers import Harness

MAIL = {"to": "ann@example.com", "subject": "Quote"}


def script(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Reply:
    if count_role(messages, "assistant") == 0:
        return Reply(text="I will mail Ann.", tool_calls=[ToolCall("crm__send_email", dict(MAIL))])
    return Reply(text=f"Answer to: {last_user_text(messages)}")


async def test_a_finished_run_continues_with_its_whole_history(tmp_path: Path) -> None:
    async with Harness(tmp_path, script) as h:
        run = await h.runs.start(
            "test", "mail Ann the quote", trigger="test", by=Principal.owner("api")
        )
        await h.drive()
        item = await h.action_item(run.id)
        await h.inbox.decide(item.id, Approve(), by=Principal.owner("api"))
        await h.drive()
        done = await h.store.get_run(run.id)
        assert done.status is RunStatus.DONE and done.result == "Answer to: mail Ann the quote"
        before = len(h.model.requests)

        await h.runs.follow_up(run.id, "Did Ann get it?", by=Principal.owner("api"))
        await h.drive()

        again = await h.store.get_run(run.id)
        assert again.status is RunStatus.DONE and again.result == "Answer to: Did Ann get it?"
        assert len(h.model.requests) == before + 1
        seen = [
            (
                m["role"],
                m.get("content"),
                [c["function"]["name"] for c in m.get("tool_calls") or []],
            )
            for m in h.model.requests[-1]["messages"]
        ]
        assert seen == [
            ("system", "You are a test agent.", []),
            ("user", "mail Ann the quote", []),
            ("assistant", "I will mail Ann.", ["crm__send_email"]),
            ("tool", "sent to ann@example.com", []),
            ("assistant", "Answer to: mail Ann the quote", []),
            ("user", "Did Ann get it?", []),
        ]
        assert h.tools.calls == [("crm.send_email", MAIL)]  # the old call is not repeated
