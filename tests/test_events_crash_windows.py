"""Crashes at the engine's worst moments, in-process against the real SQLite store.

A crash is a `Crash` (a BaseException, so nothing in the engine catches it) raised where the
process would die; the run's lease then runs out on the test's clock and another step takes
it over, as a second server would.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pizzabot.agent import conversation
from pizzabot.agent.events import AssistantMessage, BudgetExtended, ModelCall, NewEvent, RunFinished
from pizzabot.agent.model import Approve, Box, Item, ItemStatus, Risk, Run, RunStatus
from pizzabot.agent.policy import Principal
from pizzabot.agent.testing.scripts import Reply, ToolCall, last_tool_result
from pizzabot.agent.timeline import entries
from pizzabot.channels.email.compose import MailIdentity, Thread, item_mail, subject_for
from pizzabot.channels.slack.blocks import message
from tests.peers.triggers import Harness
from tests.peers.web import WebApp

MAIL = {"to": "ann@example.com", "subject": "Quote"}
AUTO = {"crm.send_email": {"policy": "auto"}}


class Crash(BaseException):
    """The process dies here."""


def mail_then_report(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Reply:
    result = last_tool_result(messages)
    if result is None:
        return Reply(text="I will mail Ann.", tool_calls=[ToolCall("crm__send_email", dict(MAIL))])
    return Reply(text=f"Done. The tool said: {result}")


def answer(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Reply:
    return Reply(text="The answer is 42.")


def mail_parts(item: Item, run: Run) -> list[str]:
    """The text and HTML parts of the item's mail to an approver."""
    identity = MailIdentity(address="pizzabot@example.com")
    mail = item_mail(
        item,
        run,
        identity=identity,
        to="ann@example.com",
        message_id="<d1@example.com>",
        thread=Thread(subject_for(item.skill, run.input)),
        can_decide=False,
        token=None,
        links=None,
        now=run.created_at,
    )
    parts = [mail.get_body(preferencelist=(kind,)) for kind in ("plain", "html")]
    return [str(p.get_content()) for p in parts if p is not None]


async def crash_in(h: Harness, patched: Callable[[], None]) -> None:
    """Step the run until the crash, then let its lease run out."""
    patched()
    with pytest.raises(Crash):
        await h.drive()
    h.clock.advance(seconds=31)


async def pending_item(h: Harness, run_id: str) -> Item:
    (item,) = await h.store.list_items(box=Box.ACTION, status=ItemStatus.PENDING, run_id=run_id)
    return item


async def test_a_final_answer_is_recorded_with_the_runs_end_or_not_at_all(
    tmp_path: Path,
) -> None:
    async with Harness(tmp_path, answer) as h:
        run = await h.runs.start(
            "test", "what is the answer?", trigger="test", by=Principal.owner("api")
        )
        real = h.store.finish_run

        async def dies(*args: Any, **kw: Any) -> Any:
            raise Crash  # the process dies as the run's end is being written

        def patch() -> None:
            h.store.finish_run = dies  # type: ignore[method-assign]

        await crash_in(h, patch)
        state = conversation.derive(await h.store.events(run.id))
        assert state.answer is None  # no answer on record for a run that did not end

        h.store.finish_run = real  # type: ignore[method-assign]
        await h.drive()
        done = await h.store.get_run(run.id)
        assert done.status is RunStatus.DONE and done.result == "The answer is 42."
        events = await h.store.events(run.id)
        answers = [e for e in events if isinstance(e.payload, AssistantMessage)]
        assert len(answers) == 1 and isinstance(events[-1].payload, RunFinished)


async def test_a_recorded_final_answer_ends_the_run_without_asking_the_model_again(
    tmp_path: Path,
) -> None:
    """The log an older server left when it died between the answer and the run's end."""
    async with Harness(tmp_path, answer) as h:
        run = await h.runs.start(
            "test", "what is the answer?", trigger="test", by=Principal.owner("api")
        )
        claimed = await h.store.claim_run(lease="old", now=h.clock(), lease_seconds=30)
        assert claimed is not None
        said = [
            NewEvent(ModelCall(model="openai/scripted", tokens_in=5, tokens_out=5)),
            NewEvent(AssistantMessage(text="It was 42.")),
        ]
        await h.store.append_events(run.id, said, lease="old", now=h.clock())
        h.clock.advance(seconds=31)

        await h.drive()
        done = await h.store.get_run(run.id)
        assert done.status is RunStatus.DONE and done.result == "It was 42."
        assert h.model.requests == []  # not asked (nor paid) again
        unread = await h.store.list_items(box=Box.UNREAD, run_id=run.id)
        assert [i.body for i in unread] == ["It was 42."]


async def test_an_approved_budget_extension_is_applied_once_across_a_crash(
    tmp_path: Path,
) -> None:
    async with Harness(tmp_path, mail_then_report, tools=AUTO, budget={"steps": 1}) as h:
        run = await h.runs.start(
            "test", "mail Ann the quote", trigger="test", by=Principal.owner("api")
        )
        await h.drive()
        item = await pending_item(h, run.id)
        assert item.args == {"steps": 1}
        await h.inbox.decide(item.id, Approve(), by=Principal.owner("api"))
        real = h.store.add_budget

        async def then_dies(*args: Any, **kw: Any) -> Any:
            await real(*args, **kw)
            raise Crash  # the extension is written; the process dies before going on

        def patch() -> None:
            h.store.add_budget = then_dies  # type: ignore[method-assign]

        await crash_in(h, patch)
        h.store.add_budget = real  # type: ignore[method-assign]
        await h.drive()

        done = await h.store.get_run(run.id)
        assert done.status is RunStatus.DONE
        assert done.budget_extra == {"steps": 1.0}  # +1 step, as approved: not +2
        events = await h.store.events(run.id)
        assert sum(isinstance(e.payload, BudgetExtended) for e in events) == 1


async def test_a_call_asked_again_after_a_crash_says_it_may_already_have_happened(
    tmp_path: Path,
) -> None:
    async with Harness(tmp_path, mail_then_report) as h:
        run = await h.runs.start(
            "test", "mail Ann the quote", trigger="test", by=Principal.owner("api")
        )
        await h.drive()
        first = await pending_item(h, run.id)
        await h.inbox.decide(first.id, Approve(), by=Principal.of("slack", "U_ANN"))
        real = h.tools.call

        async def dies(*args: Any, **kw: Any) -> Any:
            raise Crash  # started; the result is lost with the process

        def patch() -> None:
            h.tools.call = dies  # type: ignore[method-assign]

        await crash_in(h, patch)
        h.tools.call = real  # type: ignore[method-assign]
        await h.drive()

        again = await pending_item(h, run.id)
        assert again.id != first.id and again.risk.may_have_happened
        said = "it may already have happened: check before approving again"
        assert said in again.body.lower()
        # Every channel's card says so.
        slack = str(message(again, base_url="http://bot.test").blocks)
        assert said in slack
        run_now = await h.store.get_run(run.id)
        for part in mail_parts(again, run_now):
            assert said in " ".join(part.split())

        await h.inbox.decide(again.id, Approve(), by=Principal.of("slack", "U_ANN"))
        await h.drive()
        assert (await h.store.get_run(run.id)).status is RunStatus.DONE
        # The timeline shows both attempts, and that the first one's outcome is unknown.
        titles = [e.title for e in entries(await h.store.events(run.id))]
        assert "Tool crm.send_email started" in titles
        assert "Tool crm.send_email interrupted" in titles
        assert "Tool crm.send_email started (attempt 2)" in titles


async def test_the_web_page_of_a_call_asked_again_says_it_may_already_have_happened(
    tmp_path: Path,
) -> None:
    async with WebApp(tmp_path) as web:
        item = await web.action_item(
            schema={"type": "object"}, args=MAIL, risk=Risk(may_have_happened=True)
        )
        async with web.client(logged_in=True) as c:
            page = (await c.get(f"/items/{item.id}")).text
        assert "It may already have happened: check before approving again" in page
