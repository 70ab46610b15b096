"""The questions of a call in flight: answered cancel as soon as the call ends, the asker's
own wait given up (so it closes its item), and the call's time-out stopped while a person
answers and never touched once the call is over."""

from __future__ import annotations

import asyncio

import pytest

from pizzabot.agent import mcp_call
from pizzabot.agent.mcp_call import CallQuestions, wind_down
from pizzabot.agent.questions import Answer, Question

FORM = Question(message="Who?", schema={"type": "object", "properties": {}})


class Asker:
    """Waits for an answer that never comes; says when its wait was given up."""

    def __init__(self) -> None:
        self.asked = asyncio.Event()
        self.given_up = asyncio.Event()

    async def ask(self, question: Question) -> Answer:
        self.asked.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.given_up.set()
            raise
        raise AssertionError("unreachable")


async def test_a_waiting_question_is_answered_cancel_when_the_call_ends() -> None:
    asker = Asker()
    questions = CallQuestions(asker.ask)
    answer = asyncio.create_task(questions.ask(FORM))
    await asker.asked.wait()

    questions.end()

    assert await answer == Answer("cancel")
    assert asker.given_up.is_set()  # the asker closed its item before the answer went out
    assert await questions.ask(FORM) == Answer("cancel")  # a later question is not asked


async def test_without_an_asker_or_with_a_failing_one_the_answer_is_cancel() -> None:
    assert await CallQuestions(None).ask(FORM) == Answer("cancel")

    async def broken(question: Question) -> Answer:
        raise RuntimeError("the database is gone")

    assert await CallQuestions(broken).ask(FORM) == Answer("cancel")


async def test_the_calls_time_out_stops_while_a_person_answers() -> None:
    answered = asyncio.Event()

    async def person(question: Question) -> Answer:
        await answered.wait()
        return Answer("accept", {"name": "Ann"})

    questions = CallQuestions(person)
    async with asyncio.timeout(3600) as scope:
        questions.timed(scope)
        waiting = asyncio.create_task(questions.ask(FORM))
        await asyncio.sleep(0)
        assert scope.when() is None  # paused
        answered.set()
        assert await waiting == Answer("accept", {"name": "Ann"})
        assert scope.when() is not None  # running again


async def test_a_call_given_up_hears_cancel_and_may_finish_on_its_own() -> None:
    asker = Asker()
    questions = CallQuestions(asker.ask)

    async def call() -> str:
        answer = await questions.ask(FORM)
        return f"the server heard {answer.action}"

    work = asyncio.create_task(call())
    await asker.asked.wait()

    await wind_down(work, questions)

    assert work.result() == "the server heard cancel"


async def test_a_call_that_asked_nothing_is_cancelled_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(mcp_call, "WIND_DOWN", 3600.0)  # a grace waited out would hang here
    questions = CallQuestions(Asker().ask)
    started = asyncio.Event()

    async def call() -> str:
        started.set()
        await asyncio.Event().wait()  # a long tool: it would never finish on its own
        return "never"

    work = asyncio.create_task(call())
    await started.wait()

    await wind_down(work, questions)

    assert work.cancelled()
