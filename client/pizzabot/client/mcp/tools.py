"""The MCP server's two tools: `request_approval` (may an agent make this call, with which
arguments?) and `ask_human` (a question a person answers).

Each tool files a request in Pizza Bot's inbox and returns only when a person has decided,
however long that takes. A tool call that waits for a person can outlast a client's request
timeout, so while it waits the tool sends a progress notification every `heartbeat` seconds
to a client that asked for progress (a `progressToken`): clients that restart their timeout
on progress (the TypeScript SDK's `resetTimeoutOnProgress`) then wait as long as it takes.

A client that gives up loses nothing while the request is pending: asking again with the
same content joins it. Once it is decided, the same content asked again is a new request
with a card of its own: one approval is never handed to another call (a grant is the way to
say "don't ask again"). An explicit `idempotency_key` is the caller saying "this is the same
call", and finds its request, decided or not. The server audits every request filed, joined
and answered.
"""

import hashlib
import importlib.metadata
import json
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import datetime
from typing import Annotated, Any, Literal

from mcp.server.context import ServerRequestContext
from mcp.server.extension import Extension
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, Field, ValidationError

from pizzabot.client.mcp.desk import Desk, DeskError
from pizzabot.client.wire import (
    MAX_PREVIEW,
    MAX_TEXT,
    MAX_TIMEOUT,
    MAX_TITLE,
    RequestBody,
    RequestState,
    RiskNotes,
)

__all__ = ["TOOLS", "Approval", "Asking", "HumanAnswer", "build_server", "filed_only", "result_of"]

#: The most JSON one tool call may hand in as `args` or `schema` (the inbox checks it again).
MAX_JSON_BYTES = 64 * 1024
#: Derived keys count up past decided requests; past this many, the tool asks for a key.
MAX_GENERATIONS = 10_000

INSTRUCTIONS = (
    "Pizza Bot asks a person. Call request_approval before a tool call that needs a human's "
    "OK; it returns when someone has decided. Run the call only when `approved` is true, and "
    "then with the returned `args` (a person may have edited them). Call ask_human for input "
    "only a person can give. Both may take minutes or hours; asking again with the same "
    "idempotency_key returns the same request's decision; the same content joins a request "
    "only while it is pending."
)

#: The tools that ask a person (and may answer with a task).
TOOLS = frozenset({"request_approval", "ask_human"})

#: Set by a call answered with a task (`pizzabot.client.mcp.tasks`): the tool files its
#: request, puts it here and returns at once instead of waiting for a person.
filed_only: ContextVar[list[RequestState] | None] = ContextVar("filed_only", default=None)


class Approval(BaseModel):
    """A decision on a tool call."""

    request_id: str
    item_id: str
    #: pending | approved | edited | rejected | expired | halted (the kill switch is on)
    status: str
    #: True for approved and edited: run the call, with `args`.
    approved: bool
    #: The arguments to run the call with (edited ones when a person changed them).
    args: dict[str, Any] | None
    #: Why a person rejected it.
    reason: str | None
    decided_by: str | None
    via: str | None
    decided_at: str | None
    #: The item's page in Pizza Bot.
    url: str


class HumanAnswer(BaseModel):
    """A person's answer to a question, in MCP elicitation's terms."""

    request_id: str
    item_id: str
    #: accept: `content` holds the answer; decline: the person said no; cancel: nobody
    #: answered in time (or the question was withdrawn).
    action: Literal["accept", "decline", "cancel", "pending"]
    content: dict[str, Any] | None
    reason: str | None
    decided_by: str | None
    via: str | None
    decided_at: str | None
    url: str


@dataclass
class Asking:
    """How the tools reach the inbox, and how long they wait between signs of life.

    `desk_for` gives the desk of one call (its request context): on `/mcp` the server's
    requests, filed as the principal whose token the call carried; for `pizzabot mcp` the
    server over HTTP."""

    desk_for: Callable[[ServerRequestContext[Any, Any]], Desk]
    #: The inbox-only skill a request goes to unless the call names one.
    skill: str
    #: Seconds between progress notifications while a person decides.
    heartbeat: float = 15.0
    #: The next generation to try per derived key, so a long-lived server does not count
    #: up from zero every time the same content is asked again.
    _generations: dict[str, int] = field(default_factory=dict)

    async def file(self, desk: Desk, ask: RequestBody, key: str | None) -> RequestState:
        """The request for `ask`: found by an explicit key, joined while the same content
        is pending, or made anew (a request the skill's rules or grants decide as it is
        made is returned decided; one decided before is passed over)."""
        if key is not None:
            return await desk.submit(ask, key=key)
        base = _content_key(ask)
        for generation in range(self._generations.get(base, 0), MAX_GENERATIONS):
            answer = await desk.submit(ask, key=f"mcp-{base}-{generation}")
            if answer.pending or answer.created:
                self._generations[base] = generation
                return answer
        raise DeskError("this request was asked too often; pass an idempotency_key")

    async def settle(self, desk: Desk, answer: RequestState, ctx: Context) -> RequestState:
        """Wait until a person decides, telling the client it is still waiting."""
        beat = 0
        while answer.pending:
            beat += 1
            await ctx.report_progress(beat, None, f"waiting for a person: {answer.url}")
            answer = await desk.wait(answer.id, self.heartbeat)
        return answer


def _content_key(ask: RequestBody) -> str:
    body = json.dumps(ask.json_body(), sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(body.encode()).hexdigest()[:40]


def _bounded(name: str, value: Any) -> None:
    """Refuse what is too large to send at all. (What else the inbox refuses — a number
    that is not finite, nesting too deep — it refuses before it files anything, and the
    tool reports that as its error.)"""
    if value is None:
        return
    if len(json.dumps(value, default=str).encode()) > MAX_JSON_BYTES:
        raise ToolError(f"{name} is larger than {MAX_JSON_BYTES} bytes of JSON")


def _iso(at: datetime | None) -> str | None:
    return at.isoformat() if at is not None else None


def approval_of(answer: RequestState) -> Approval:
    return Approval(
        request_id=answer.id,
        item_id=answer.item_id,
        status=answer.status,
        approved=answer.status in ("approved", "edited"),
        args=answer.args,
        reason=answer.reason,
        decided_by=answer.decided_by,
        via=answer.via,
        decided_at=_iso(answer.decided_at),
        url=answer.url,
    )


_ACTIONS: dict[str, Literal["accept", "decline", "cancel", "pending"]] = {
    "answered": "accept",
    "declined": "decline",
    "expired": "cancel",
    "halted": "cancel",
    "pending": "pending",
}


def human_answer_of(answer: RequestState) -> HumanAnswer:
    return HumanAnswer(
        request_id=answer.id,
        item_id=answer.item_id,
        action=_ACTIONS.get(answer.status, "cancel"),
        content=answer.args if answer.status == "answered" else None,
        reason=answer.reason,
        decided_by=answer.decided_by,
        via=answer.via,
        decided_at=_iso(answer.decided_at),
        url=answer.url,
    )


def approval_text(a: Approval) -> str:
    who = f" by {a.decided_by}" if a.decided_by else ""
    via = f" via {a.via}" if a.via else ""
    if a.approved:
        verb = "Edited and approved" if a.status == "edited" else "Approved"
        return f"{verb}{who}{via}. Run the call with these arguments: {json.dumps(a.args)}"
    if a.status == "rejected":
        reason = a.reason or "no reason given"
        return f"Rejected{who}{via}: {reason}. Do not run the call."
    if a.status == "expired":
        return "Nobody decided in time (expired). Do not run the call."
    if a.status == "halted":
        return f"Halted: {a.reason}. Do not run the call."
    return f"Still waiting for a decision: {a.url}"


def answer_text(h: HumanAnswer) -> str:
    who = f" by {h.decided_by}" if h.decided_by else ""
    if h.action == "accept":
        return f"Answered{who}: {json.dumps(h.content)}"
    if h.action == "decline":
        return f"Declined{who}" + (f": {h.reason}" if h.reason else ".")
    if h.action == "cancel":
        return "Nobody answered in time (cancelled)."
    return f"Still waiting for an answer: {h.url}"


def result_of(answer: RequestState) -> CallToolResult:
    """The tool's result for a request as it stands: `request_approval`'s for an approval,
    `ask_human`'s for a question."""
    if answer.kind == "question":
        human = human_answer_of(answer)
        return _result(human, answer_text(human))
    approval = approval_of(answer)
    return _result(approval, approval_text(approval))


def _result(model: BaseModel, text: str) -> CallToolResult:
    return CallToolResult(
        content=[TextContent(type="text", text=text)],
        structured_content=model.model_dump(mode="json"),
    )


def build_server(
    asking: Asking,
    *,
    name: str = "pizzabot",
    version: str | None = None,
    extensions: list[Extension] | None = None,
) -> MCPServer:
    """An MCP server with `request_approval` and `ask_human`, asking through `asking`.
    `version` is what `serverInfo` reports (default: this distribution's installed version),
    so a client's logs say which release answered. `extensions`: e.g. the Tasks extension
    (`pizzabot.client.mcp.tasks.Tasks`)."""
    version = version or _installed_version()
    server = MCPServer(
        name,
        version=version,
        instructions=INSTRUCTIONS,
        log_level="WARNING",
        extensions=extensions,
    )
    _add_request_approval(server, asking)
    _add_ask_human(server, asking)
    return server


def _installed_version() -> str:
    try:
        return importlib.metadata.version("pizzabot-client")
    except importlib.metadata.PackageNotFoundError:  # run from a source tree, not installed
        return "0+unknown"


#: Both tools wait for a person, change nothing themselves, and reach outside the client.
_WAITS = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=True)


def _add_request_approval(server: MCPServer, asking: Asking) -> None:
    @server.tool(annotations=_WAITS)
    async def request_approval(
        title: Annotated[str, Field(min_length=1, max_length=MAX_TITLE)],
        tool: Annotated[str, Field(min_length=1, max_length=MAX_TITLE)],
        args: dict[str, Any],
        ctx: Context,
        schema: dict[str, Any] | None = None,
        risk: RiskNotes | None = None,
        description: Annotated[str | None, Field(max_length=MAX_TEXT)] = None,
        timeout: Annotated[float | None, Field(ge=1, le=MAX_TIMEOUT)] = None,
        idempotency_key: Annotated[str | None, Field(min_length=1, max_length=MAX_TITLE)] = None,
        skill: Annotated[str | None, Field(min_length=1, max_length=MAX_TITLE)] = None,
        preview: Annotated[str | None, Field(min_length=1, max_length=MAX_PREVIEW)] = None,
    ) -> Annotated[CallToolResult, Approval]:
        """Ask a person to approve a tool call before you make it; returns when someone has
        decided (approve, edit the arguments, or reject with a reason), however long that
        takes. Run the call only when `approved` is true, and with the returned `args`.

        title: one line for the card. tool: the call's name. args: its proposed arguments.
        schema: the arguments' JSON schema (an edit form is made from it). risk: impact,
        reversible, scope. timeout: seconds before the request expires. idempotency_key:
        asking again with it returns the same request (by default the content is the key).
        skill: the Pizza Bot inbox-only skill that decides who is asked. preview: what the
        call would do (your dry run's output, a diff), shown on the card as yours."""
        _bounded("args", args)
        _bounded("schema", schema)
        ask = _body(
            skill=skill or asking.skill,
            title=title,
            tool=tool,
            args=args,
            schema=schema,
            risk=risk,
            description=description,
            timeout=timeout,
            preview=preview,
        )
        answer = await _decided(asking, ask, idempotency_key, ctx)
        approval = approval_of(answer)
        return _result(approval, approval_text(approval))


def _add_ask_human(server: MCPServer, asking: Asking) -> None:
    @server.tool(annotations=_WAITS)
    async def ask_human(
        question: Annotated[str, Field(min_length=1, max_length=MAX_TEXT)],
        ctx: Context,
        schema: dict[str, Any] | None = None,
        title: Annotated[str | None, Field(min_length=1, max_length=MAX_TITLE)] = None,
        timeout: Annotated[float | None, Field(ge=1, le=MAX_TIMEOUT)] = None,
        idempotency_key: Annotated[str | None, Field(min_length=1, max_length=MAX_TITLE)] = None,
        skill: Annotated[str | None, Field(min_length=1, max_length=MAX_TITLE)] = None,
    ) -> Annotated[CallToolResult, HumanAnswer]:
        """Ask a person a question; returns their answer when they give it. Without a
        schema the answer is free text (`content.answer`); with one (a flat JSON object
        schema) the person fills in a form. `action` is accept (with `content`), decline
        (they said no) or cancel (nobody answered in time)."""
        _bounded("schema", schema)
        ask = _body(
            skill=skill or asking.skill,
            title=title or _first_line(question),
            schema=schema,
            timeout=timeout,
            question=question,
        )
        answer = await _decided(asking, ask, idempotency_key, ctx)
        human = human_answer_of(answer)
        return _result(human, answer_text(human))


def _body(**fields: Any) -> RequestBody:
    try:
        return RequestBody.model_validate(fields)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise ToolError(f"{'.'.join(map(str, first['loc']))}: {first['msg']}") from None


async def _decided(asking: Asking, ask: RequestBody, key: str | None, ctx: Context) -> RequestState:
    try:
        desk = asking.desk_for(ctx.request_context)
        answer = await asking.file(desk, ask, key)
        filed = filed_only.get()
        if filed is not None:
            filed.append(answer)
            return answer
        return await asking.settle(desk, answer, ctx)
    except DeskError as exc:
        raise ToolError(str(exc)) from None


def _first_line(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else text
    return line if len(line) <= MAX_TITLE else line[: MAX_TITLE - 1] + "…"
