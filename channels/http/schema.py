"""The HTTP API's documented shapes: what `/openapi.json` promises for each answer, so that a
generated client and a conformance checker agree with the server.

The routes answer with these models, made from the engine's nouns (`pizzabot.channels.http.answers`).
Times are ISO 8601 strings.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer


class Usage(BaseModel):
    tokens: int
    cost_usd: float
    steps: int
    cost_known: bool


class RunOut(BaseModel):
    id: str
    skill: str
    status: str
    input: str
    trigger: str
    created_at: str
    updated_at: str
    started_at: str | None
    finished_at: str | None
    result: str | None
    error: str | None
    usage: Usage
    killed_by: str | None


class EventOut(BaseModel):
    seq: int
    kind: str
    at: str
    data: dict[str, Any]


class TimelineBlock(BaseModel):
    label: str
    text: str
    #: JSON (shown as code) rather than words a person or a model wrote.
    code: bool


class TimelineEntry(BaseModel):
    """One event in words, as the web page shows it (`pizzabot.agent.timeline`)."""

    seq: int
    #: start, message, model, assistant, request, decision, tool, error, budget, note, finish.
    tone: str
    title: str
    at: str
    #: Time since the run started ("+1.2s").
    offset: str
    facts: list[tuple[str, str]]
    blocks: list[TimelineBlock]
    item_id: str | None
    failed: bool


class RunDetail(RunOut):
    events: list[EventOut]
    #: The events in words: who decided via which channel, what an edit changed, each
    #: tool's result.
    timeline: list[TimelineEntry]


class RunList(BaseModel):
    items: list[RunOut]


class Preview(BaseModel):
    """What the call would do, worked out when the card was made, not what ran: a dry run's
    text (`by` the tool that made it), or a request's agent's own (`by` that agent, marked
    as not checked by Pizza Bot). Show it as text. `failed`: no preview; `text` says why."""

    text: str
    by: str
    failed: bool = False


class Risk(BaseModel):
    """What the card says about the call. The skill's notes are always there (null when
    unset); the rest only when it applies, so an item without them reads as it always did."""

    impact: str | None = None
    reversible: bool | None = None
    scope: str | None = None
    # A call asked again after a crash whose first attempt may already have taken effect.
    may_have_happened: bool | None = None
    # The tool server's own annotations in words ("read-only"), not checked.
    hints: list[str] | None = None
    # The rule that asked ("rule 2 of crm.refund", with its reason).
    rule: str | None = None
    # The grants offered next to Approve ("run", "1h", "exact").
    grants: list[str] | None = None
    # How many different people must approve, and who has so far.
    approvals_required: int | None = None
    approved: list[str] | None = None
    # "passkey": an approval needs a fresh passkey assertion, given on the web page.
    step_up: str | None = None
    # What the call would do, made when the card was made (not what ran): by a dry run,
    # or sent by the agent that asked.
    preview: Preview | None = None
    # What happens while nobody decides (the escalation ladder, in words).
    ladder: str | None = None
    # The ladder's steps and on-call hand-overs so far, oldest first.
    steps: list[str] | None = None

    @model_serializer(mode="wrap")
    def _only_what_applies(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        always = {"impact", "reversible", "scope"}
        return {k: v for k, v in data.items() if k in always or v not in (None, [], ())}


class UndoOut(BaseModel):
    """The Undo a `notify` FYI offers: the compensating call, and how far it got
    (`offered`, `running`, `done`, `failed`), who undid it and what the call answered."""

    tool: str
    args: dict[str, Any]
    state: str
    by: str | None = None
    via: str | None = None
    at: str | None = None
    outcome: str | None = None


class ItemOut(BaseModel):
    model_config = ConfigDict(populate_by_name=True, serialize_by_alias=True)

    id: str
    run_id: str
    skill: str
    box: str
    kind: str
    status: str
    title: str
    body: str
    created_at: str
    tool: str | None
    server: str | None
    args: dict[str, Any] | None
    schema_: dict[str, Any] | None = Field(alias="schema")
    risk: Risk
    decided_by: str | None
    decided_via: str | None
    decided_at: str | None
    final_args: dict[str, Any] | None
    reason: str | None
    read_at: str | None
    #: The grants an approval of this item may ask for ("run", "1h", "exact"); empty: none.
    grants: list[str] = []
    #: Bumped by every change to what the card shows.
    version: int
    #: The digest of the card as it shows the item now: send it back as a decision's `seen`.
    digest: str
    #: Who asked for it (a request's filer), when known.
    requested_by: str | None = None
    #: Asked by an agent Pizza Bot does not run (a request), not by a run's model.
    requested: bool = False
    #: The Undo a `notify` FYI offers (`POST /api/items/{id}/undo`); None: none.
    undo: UndoOut | None = None


class ItemList(BaseModel):
    items: list[ItemOut]


class AuditOut(BaseModel):
    id: int
    at: str
    action: str
    actor: str
    channel: str
    run_id: str | None
    item_id: str | None
    detail: dict[str, Any]


class AuditList(BaseModel):
    items: list[AuditOut]


class KillState(BaseModel):
    model_config = ConfigDict(extra="allow")

    on: bool
    by: str | None = None
    at: str | None = None
    reason: str | None = None


class KillOn(BaseModel):
    on: bool
    killed: list[str]


class KillOff(BaseModel):
    on: bool


class OutboxHealth(BaseModel):
    """Deliveries the outbox gave up (dead letters): never tried again; see the audit's
    `delivery_dead` entries for each one's last error."""

    dead: int = Field(description="Deliveries given up, on every channel")
    dead_by_channel: dict[str, int] = Field(description="The same, by channel")


class Status(BaseModel):
    database: str
    worker: str | None
    leading: list[str]
    channels: list[str]
    kill: bool
    outbox: OutboxHealth
    #: Per skill, the MCP servers this process is connected to now (a stdio server's
    #: process running, an HTTP server's session open).
    mcp: dict[str, list[str]] = {}


class SkillOut(BaseModel):
    name: str
    description: str
    model: str | None  # None: an inbox-only skill (it answers requests)
    servers: list[str]


class SkillProblem(BaseModel):
    line: int | None
    message: str


class SkillError(BaseModel):
    """A skill file the server refused."""

    path: str
    line: int | None = Field(description="The first problem's line")
    message: str = Field(description="Every problem, each with its line")
    name: str | None = Field(description="The skill's name, when the file's `name:` was read")
    problems: list[SkillProblem]
    kept: str | None = Field(
        description="The skill whose last good version keeps running in its place"
    )


class SkillList(BaseModel):
    items: list[SkillOut]
    errors: list[SkillError]
    watch_seconds: float = Field(
        description="How often the server looks for changed skill files; 0: only on reload"
    )


class SkillChanges(BaseModel):
    added: list[str]
    changed: list[str]
    removed: list[str]


class SkillReload(SkillList):
    """The skills after a reload, and what it changed."""

    changes: SkillChanges


class FireOut(BaseModel):
    fire_time: str
    status: str
    run_id: str | None
    detail: str | None


class ScheduleOut(BaseModel):
    id: str
    skill: str
    source: str
    cron: str | None
    every_seconds: float | None
    input: str
    timezone: str
    misfire: str
    paused: bool
    created_at: str
    next_fire_times: list[str]
    last_fire: FireOut | None
    error: str | None


class ScheduleDetail(ScheduleOut):
    fires: list[FireOut]


class ScheduleList(BaseModel):
    items: list[ScheduleOut]
    errors: list[dict[str, str]]


class Deleted(BaseModel):
    deleted: str


# -- errors ------------------------------------------------------------------------------


class InvalidDetail(BaseModel):
    """422 from the engine: the arguments broke the tool's schema (or a schedule's rules)."""

    message: str
    errors: dict[str, str]


class DecidedDetail(BaseModel):
    """409 for a decision: someone decided first."""

    message: str
    status: str
    decided_by: str | None
    decided_via: str | None
    decided_at: str | None


class FieldError(BaseModel):
    """422 from request validation (FastAPI's shape): where, what, and the input."""

    model_config = ConfigDict(extra="allow")

    loc: list[str | int]
    msg: str
    type: str


class Error(BaseModel):
    """Every error answer: `{"detail": ...}`."""

    detail: str | InvalidDetail | DecidedDetail | list[FieldError]


def errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    """The `responses=` entry documenting the given error statuses as `Error`."""
    what = {
        400: "The body is not JSON (or not UTF-8)",
        401: "Missing or wrong API token",
        403: "Not allowed",
        404: "Not found",
        408: "The body took too long to arrive",
        409: "Conflict: already decided, the kill switch is on, or the state does not allow it",
        413: "The body is larger than the server's limit",
        415: "The body's media type is not taken here",
        422: "Invalid input",
        503: "Not available on this server (or still starting)",
    }
    return {code: {"model": Error, "description": what[code]} for code in codes}
