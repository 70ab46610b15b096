"""One MCP client, held open by a task of its own: its transport (stdio, or HTTP with the
skill's headers and OAuth), its listing of tools, and the questions a server asks in the middle
of a call, routed to the call in flight that asked (see `pizzabot.agent.tools_mcp`, whose hub
keeps one per configured server)."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import itertools
import logging
from typing import TYPE_CHECKING, Any

from pizzabot.agent.errors import RunError
from pizzabot.agent.mcp_call import CallQuestions
from pizzabot.agent.mcp_http import HttpTarget
from pizzabot.agent.mcp_identity import client_info
from pizzabot.agent.mcp_oauth import Consent
from pizzabot.agent.policy.rules import ToolHints
from pizzabot.agent.questions import Question
from pizzabot.agent.tools import AskFn, ToolSpec

if TYPE_CHECKING:  # the SDK takes seconds to import: load it on the first connection
    import mcp_types
    from mcp.client import Client
    from mcp.client.session import ClientRequestContext
    from mcp.client.stdio import StdioServerParameters

__all__ = ["ASKING", "Connection"]

log = logging.getLogger(__name__)

# The call that is asking, inside the call's own task (the `input_required` path).
ASKING: contextvars.ContextVar[CallQuestions | None] = contextvars.ContextVar(
    "asking", default=None
)

# Numbers each listing of a server's tools, so a hub can tell a listing it has checked.
_LISTINGS = itertools.count(1)


class Connection:
    """One MCP client, owned by a task of its own.

    The SDK's clients live in anyio task groups, which must be entered and left by the same
    task; runs come and go in other tasks, so the connection gets a task that holds it open.
    """

    def __init__(self, name: str, target: StdioServerParameters | HttpTarget) -> None:
        self.name = name
        self.target = target
        #: What an HTTP server refused (401, 403), to say it plainly; None for stdio.
        self.refusals = target.refusals() if isinstance(target, HttpTarget) else None
        #: The OAuth of an `auth: oauth` server (an httpx auth), and whom it asks to connect.
        self.auth: Any = None
        self.consent: Consent | None = None
        self.client: Client | None = None
        self.tools: list[ToolSpec] = []
        #: Which listing `tools` is (0: none yet); a new one on every (re)connection.
        self.listing = 0
        self.lock = asyncio.Lock()
        #: The skills that use this server (the status page lists it under each).
        self.users: set[str] = set()
        self._task: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()
        #: The calls in flight, each with the questions it may ask.
        self.in_flight: dict[int, CallQuestions] = {}
        self._tokens = itertools.count()

    def enter(self, questions: CallQuestions) -> int:
        token = next(self._tokens)
        self.in_flight[token] = questions
        return token

    def leave(self, token: int) -> None:
        self.in_flight.pop(token, None)

    async def _elicit(
        self, context: ClientRequestContext, params: mcp_types.ElicitRequestParams
    ) -> mcp_types.ElicitResult:
        """A server asks for input: ask the person through the call in flight."""
        import mcp_types

        questions = ASKING.get()
        if questions is None and len(self.in_flight) == 1:
            questions = next(iter(self.in_flight.values()))
        if questions is None or not questions.can_ask:
            # No call that can ask, or several calls whose asker cannot be told apart.
            log.warning(
                "MCP server %s asked for input, but no single call in flight can ask "
                "(%d in flight): answered cancel",
                self.name,
                len(self.in_flight),
            )
            return mcp_types.ElicitResult(action="cancel")
        if isinstance(params, mcp_types.ElicitRequestURLParams):
            question = Question(message=params.message, url=params.url)
        else:
            question = Question(message=params.message, schema=dict(params.requested_schema))
        answer = await questions.ask(question)
        content = answer.content if answer.action == "accept" and question.url is None else None
        return mcp_types.ElicitResult(action=answer.action, content=content)

    async def _hold(self, ready: asyncio.Future[Client]) -> None:
        from mcp.client import Client

        ASKING.set(None)  # this task's context is copied from whoever opened it
        try:
            async with contextlib.AsyncExitStack() as stack:
                server = await self._transport(stack)
                client = await stack.enter_async_context(
                    Client(server, elicitation_callback=self._elicit, client_info=client_info())
                )
                if not ready.done():
                    ready.set_result(client)
                await self._stop.wait()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc if isinstance(exc, Exception) else RunError(repr(exc)))
            if isinstance(exc, asyncio.CancelledError):
                raise
            log.warning("MCP server %s stopped: %r", self.name, exc)
        finally:
            self.client = None

    async def _transport(self, stack: contextlib.AsyncExitStack) -> Any:
        """The stdio parameters, or an HTTP transport whose client sends the skill's headers
        and watches for refusals (closed with the connection)."""
        target = self.target
        if not isinstance(target, HttpTarget):
            return target
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared._httpx_utils import create_mcp_http_client

        http = await stack.enter_async_context(
            create_mcp_http_client(headers=target.headers, auth=self.auth)
        )
        if self.refusals is not None:
            self.refusals.status = None
            http.event_hooks["response"].append(self.refusals.hook)
        return streamable_http_client(target.url, http_client=http)

    def refused(self) -> str | None:
        """What the server (or its OAuth consent) refused, in words (None: nothing)."""
        flow = getattr(self.auth, "flow", None)
        if flow is not None and flow.error is not None:
            return str(flow.error)
        return self.refusals.said() if self.refusals is not None else None

    def asks(self) -> Consent | None:
        """Whom a consent goes to: the run opening this connection, or its one call in flight."""
        if self.consent is None and len(self.in_flight) == 1:
            return Consent(next(iter(self.in_flight.values())))
        return self.consent

    async def open(self, timeout: float, connect: AskFn | None = None) -> Client:
        """The client, connected and its tools listed (opened now if it is not). `connect`:
        whom to ask when connecting needs a person (an OAuth consent)."""
        async with self.lock:
            if self.client is not None and self._task is not None and not self._task.done():
                return self.client
            self.consent = Consent(CallQuestions(connect), getattr(connect, "__self__", None))
            try:
                client, listing = await self._start(timeout, self.consent.questions)
            finally:
                self.consent.questions.end()
                self.consent = None
            self.tools = [
                ToolSpec(
                    self.name,
                    t.name,
                    t.description or "",
                    dict(t.input_schema),
                    ToolHints.of(t.annotations),
                )
                for t in listing.tools
            ]
            self.listing = next(_LISTINGS)
            self.client = client
            return client

    async def _start(
        self, timeout: float, consent: CallQuestions
    ) -> tuple[Client, mcp_types.ListToolsResult]:
        self._stop = asyncio.Event()
        ready: asyncio.Future[Client] = asyncio.get_running_loop().create_future()
        self._task = asyncio.create_task(self._hold(ready), name=f"mcp:{self.name}")
        try:
            # A timeout scope, not `wait_for`: on Python 3.11 `wait_for` can swallow a
            # cancel that arrives as the inner call finishes (see agent/tasks.py).
            async with asyncio.timeout(timeout) as scope:
                consent.timed(scope)  # a person's time to consent is not the server's
                client = await asyncio.shield(ready)
                return client, await client.list_tools()
        except asyncio.CancelledError:
            await self._discard()
            raise
        except Exception as exc:
            await self._discard()
            said = self.refused()
            if said is not None:
                raise RunError(f"MCP server {self.name!r}: {said}") from exc
            raise RunError(f"MCP server {self.name!r} could not be reached: {exc!r}") from exc

    async def _discard(self) -> None:
        self.client = None
        self._stop.set()
        task, self._task = self._task, None
        if task is not None:
            # The holding task swallows its server's errors; a server that does not stop in
            # time is cancelled by the scope (awaiting a task passes the cancel on to it).
            try:
                async with asyncio.timeout(5):
                    await task
            except TimeoutError:
                log.debug("MCP server %s did not stop within 5s", self.name)

    async def close(self) -> None:
        async with self.lock:
            await self._discard()
