"""One tool call in flight at an MCP server, and the questions its server asks meanwhile.

A server may ask the person behind a run for input in the middle of a call (elicitation).
A question lives only as long as the call that asked it: when the call ends for any reason
(it returned, its transport dropped, the run that made it was cancelled), a question still
waiting is answered `cancel` at once, and the asker closes its item. Waiting for anything
else (another item's decision, the question's own time-out) would leave the server hanging
for minutes and then answer it with an internal error, since the call's scope is gone.

A run cancelled while its call waits on a person does not just drop the call: the server hears
`cancel` first (a response to its `elicitation/create` on older protocols; the call's retry
carrying the answer on the 2026-07-28 protocol's "input required") and gets a moment
(`WIND_DOWN`) to wrap up and release what it holds; only then is the call itself cancelled.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from typing import TypeVar

from pizzabot.agent.questions import Answer, Question
from pizzabot.agent.tools import AskFn

__all__ = ["WIND_DOWN", "CallQuestions", "wind_down"]

log = logging.getLogger(__name__)

#: Seconds a call whose run was cancelled may take to wrap up after hearing `cancel`.
WIND_DOWN = 5.0

T = TypeVar("T")


class CallQuestions:
    """The questions of one call in flight: `ask` puts one to the person (through the run's
    asker) while the call lasts; `end` answers every waiting and later one with cancel.

    The call's time-out (`timed`) is stopped while a person answers: a person may take an
    hour, and that is not the tool being slow."""

    def __init__(self, ask: AskFn | None) -> None:
        self._ask = ask
        self._over = asyncio.Event()
        self._scope: asyncio.Timeout | None = None
        self._waiting = 0
        self._left: float | None = None
        self._idle = asyncio.Event()
        self._idle.set()
        #: Whether a question was put to the person (the server then waits on its answer).
        self.asked = False

    @property
    def can_ask(self) -> bool:
        return self._ask is not None

    @property
    def over(self) -> bool:
        return self._over.is_set()

    def timed(self, scope: asyncio.Timeout | None) -> None:
        """The call's time-out scope, paused while a question waits (None: it has ended)."""
        self._scope = scope

    def end(self) -> bool:
        """The call is over (or being given up): no question waits any longer. True when a
        question was waiting (it is answered cancel now)."""
        self._over.set()
        return self._waiting > 0

    async def ask(self, question: Question) -> Answer:
        """Ask, and wait until the person answers or the call ends (then: cancel)."""
        if self._ask is None or self.over:
            return Answer("cancel")
        self.asked = True
        self._pause()
        try:
            return await _until_over(self._ask(question), self._over)
        finally:
            self._resume()

    async def settled(self, timeout: float = WIND_DOWN) -> None:
        """Wait (at most `timeout`) until no question of this call is still being answered:
        the answers are handed to the server's session before the caller may close it."""
        try:
            async with asyncio.timeout(timeout):
                await self._idle.wait()
        except TimeoutError:
            log.warning("a question of an ended call was still being answered after %ss", timeout)

    def _pause(self) -> None:
        self._waiting += 1
        self._idle.clear()
        scope = self._scope
        if self._waiting > 1 or scope is None:
            return
        when = scope.when()
        loop = asyncio.get_running_loop()
        self._left = None if when is None else max(0.0, when - loop.time())
        scope.reschedule(None)

    def _resume(self) -> None:
        self._waiting -= 1
        if not self._waiting:
            self._idle.set()
        scope, left = self._scope, self._left
        # Once over, the call's scope may be gone: rescheduling a finished one raises.
        if self._waiting or scope is None or left is None or self.over:
            return
        scope.reschedule(asyncio.get_running_loop().time() + left)


async def _until_over(asking: Awaitable[Answer], over: asyncio.Event) -> Answer:
    """`asking`'s answer, or cancel as soon as `over` is set. The asking is cancelled then and
    waited for, so its item is closed before the server hears the answer."""
    task = asyncio.ensure_future(asking)
    ended = asyncio.create_task(over.wait())
    try:
        await asyncio.wait({task, ended}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        ended.cancel()
        if not task.done():
            task.cancel()
            await asyncio.wait({task})
    if task.cancelled():
        return Answer("cancel")
    error = task.exception()
    if error is not None:
        # The server is owed an answer whatever went wrong here; the reason goes to the log.
        log.warning("asking a person failed, answered cancel: %r", error)
        return Answer("cancel")
    return task.result()


async def wind_down(work: asyncio.Task[T], questions: CallQuestions) -> None:
    """Give up a call: its questions are answered cancel and, when one was waiting, the
    server gets `WIND_DOWN` seconds to finish the call on its own; then the call is
    cancelled. A call that asked nothing is cancelled at once: there is nothing to hear."""
    asked = questions.end()
    try:
        if asked and not work.done():
            await asyncio.wait({work}, timeout=WIND_DOWN)
    finally:
        if not work.done():
            work.cancel()
            await asyncio.wait({work})
        elif not work.cancelled():
            work.exception()  # taken, so it is not reported as never retrieved
