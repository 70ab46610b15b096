"""The run's event log as types: one pydantic model per kind of event, checked when read.

The event log is the durable state of a run and its trace, so what it holds is a contract
with every database written before: each stored event carries `EVENT_SCHEMA_VERSION`, a
version this code does not know is refused (`UnknownEventVersion`) rather than guessed at,
and the logs of earlier versions are kept as fixtures (`tests/fixtures/event_logs/`).

A payload's JSON is the stored shape and the API's `data`: the kind lives in its own column,
and a decision is stored flat (`"decision": "edit", "args": …, "reason": …`) as it always
was, while in Python it is the `Decision` union (`pizzabot.agent.model`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    model_serializer,
    model_validator,
)
from pydantic_core.core_schema import SerializerFunctionWrapHandler

from pizzabot.agent.errors import PizzaBotError
from pizzabot.agent.model import EVENT_SCHEMA_VERSION, Decision, EventKind, RunStatus

__all__ = [
    "AssistantMessage",
    "BudgetExtended",
    "BudgetReached",
    "DecisionMade",
    "ErrorNoted",
    "EventPayload",
    "ModelCall",
    "Note",
    "ProposedCall",
    "QuestionRemark",
    "RunFinished",
    "RunStarted",
    "TimerRemark",
    "ToolInterrupted",
    "ToolRequest",
    "ToolResult",
    "ToolStarted",
    "UnknownEventVersion",
    "UserMessage",
    "load_event",
    "parse_payload",
]

JsonObject = dict[str, Any]


class UnknownEventVersion(PizzaBotError):
    """A stored event was written by a schema version this code does not know."""


class _Payload(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    #: Fields left out of the stored JSON when None or False: the parts of an event that
    #: only some events of its kind have, stored the way every version so far stored them.
    _omit_unset: ClassVar[frozenset[str]] = frozenset()

    def stored(self) -> JsonObject:
        """The payload as stored and as the API shows it (the kind has a column of its own)."""
        out = self.model_dump(mode="json", by_alias=True, exclude={"kind"})
        for name in self._omit_unset:
            if out.get(name) in (None, False):
                out.pop(name, None)
        return out


class RunStarted(_Payload):
    kind: Literal[EventKind.RUN_STARTED] = EventKind.RUN_STARTED
    input: str = ""
    trigger: str = ""
    by: str | None = None


class UserMessage(_Payload):
    kind: Literal[EventKind.USER_MESSAGE] = EventKind.USER_MESSAGE
    text: str
    by: str | None = None
    channel: str | None = None


class ModelCall(_Payload):
    kind: Literal[EventKind.MODEL_CALL] = EventKind.MODEL_CALL
    model: str = ""
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float | None = None  # None: the provider's price is not known
    latency_ms: float = 0.0
    attempts: int = 1


class ProposedCall(BaseModel):
    """One tool call as the model asked for it (its wire name, e.g. ``crm__send_email``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    id: str
    name: str
    arguments: JsonObject = Field(default_factory=dict)


class AssistantMessage(_Payload):
    kind: Literal[EventKind.ASSISTANT_MESSAGE] = EventKind.ASSISTANT_MESSAGE
    text: str | None = None
    tool_calls: list[ProposedCall] = Field(default_factory=list)

    @property
    def final(self) -> bool:
        """The model answered without asking for a tool: this is the run's result."""
        return not self.tool_calls


class ToolRequest(_Payload):
    """A person was asked about a call (an action item was made for it)."""

    kind: Literal[EventKind.TOOL_REQUEST] = EventKind.TOOL_REQUEST
    _omit_unset = frozenset({"rule"})
    call_id: str
    item_id: str
    tool: str = ""
    args: JsonObject = Field(default_factory=dict)
    #: Asked again because the approved call started and a crash lost its result.
    reasked: bool = False
    #: The rule that made it `ask` ("rule 2 of crm.refund"); absent: the tool's policy.
    rule: str | None = None


class DecisionMade(_Payload):
    """A decision on an item: a person's, or the clock's (`Expired`).

    `args` are the arguments the call runs with (the proposal when approved, the edit when
    edited; for a budget item, the extension), `args_before` the proposal."""

    kind: Literal[EventKind.DECISION] = EventKind.DECISION
    item_id: str
    call_id: str | None = None
    decision: Annotated[Decision, Field(discriminator="kind")]
    args_before: JsonObject | None = None
    args: JsonObject | None = None
    actor: str = ""
    channel: str = ""

    @model_validator(mode="before")
    @classmethod
    def _from_stored(cls, data: Any) -> Any:
        """The stored shape is flat: the decision's kind, with its reason and halt beside it."""
        if not isinstance(data, Mapping) or not isinstance(data.get("decision"), str):
            return data
        flat = dict(data)
        kind = flat.pop("decision")
        reason = flat.pop("reason", None) or ""
        halt = bool(flat.pop("halt", False))
        decision: JsonObject = {"kind": kind}
        grant = flat.pop("grant", None)
        if kind == "approve" and grant:
            decision["grant"] = grant
        if kind == "edit":
            decision["args"] = dict(flat.get("args") or {})
        elif kind == "reject":
            decision["reason"] = reason
        elif kind == "expired":
            decision.update(reason=reason, halt=halt)
        flat["decision"] = decision
        return flat

    @model_serializer(mode="wrap")
    def _to_stored(self, handler: SerializerFunctionWrapHandler) -> JsonObject:
        out: JsonObject = handler(self)
        nested = out.pop("decision", None)
        if not isinstance(nested, dict):  # `decision` excluded by the caller
            return out
        out["decision"] = nested["kind"]
        out["reason"] = nested.get("reason") or None
        if nested.get("grant"):  # stored only with a grant, as before grants existed
            out["grant"] = nested["grant"]
        if nested["kind"] == "expired":
            out["halt"] = bool(nested.get("halt"))
            for name in ("args_before", "args"):  # the clock decides on no arguments
                if out.get(name) is None:
                    out.pop(name, None)
        return out


class ToolStarted(_Payload):
    """Written before a tool is called, so a crash during the call is known for what it was."""

    kind: Literal[EventKind.TOOL_STARTED] = EventKind.TOOL_STARTED
    _omit_unset = frozenset({"rule", "grant"})
    call_id: str
    tool: str = ""
    args: JsonObject = Field(default_factory=dict)
    item_id: str | None = None
    #: What made it run without asking ("rule 1 of crm.refund", or the tool's read-only
    #: hints); absent: the tool's policy, or a person (`item_id`).
    rule: str | None = None
    #: The id of the grant that let it run without asking (`pizzabot.agent.policy.grants`).
    grant: str | None = None


class ToolResult(_Payload):
    """What the model is told about a call: the tool's answer, or why it did not run."""

    kind: Literal[EventKind.TOOL_RESULT] = EventKind.TOOL_RESULT
    _omit_unset = frozenset({"args", "rejected", "expired", "interrupted", "denied_by"})
    call_id: str
    tool: str = ""
    text: str = ""
    is_error: bool = False
    duration_ms: float = 0.0
    #: The arguments it ran with; None when it did not run.
    args: JsonObject | None = None
    rejected: bool = False
    expired: bool = False
    #: A crash lost the call's outcome and it was not repeated.
    interrupted: bool = False
    #: The rule that denied it ("rule 2 of crm.refund"); `text` has the rule's reason.
    denied_by: str | None = None


class ToolInterrupted(_Payload):
    """An approved call started and a crash lost its result: it may have taken effect."""

    kind: Literal[EventKind.TOOL_INTERRUPTED] = EventKind.TOOL_INTERRUPTED
    call_id: str
    tool: str = ""
    # Stored as "note" by every version so far.
    why: str = Field(
        default="", validation_alias=AliasChoices("note", "why"), serialization_alias="note"
    )


class BudgetReached(_Payload):
    kind: Literal[EventKind.BUDGET_REACHED] = EventKind.BUDGET_REACHED
    item_id: str
    why: str = ""
    extend: dict[str, float] = Field(default_factory=dict)


class BudgetExtended(_Payload):
    kind: Literal[EventKind.BUDGET_EXTENDED] = EventKind.BUDGET_EXTENDED
    _omit_unset = frozenset({"item_id"})
    extend: dict[str, float] = Field(default_factory=dict)
    by: str | None = None
    #: The budget item whose approval this applies (absent in logs of older servers).
    item_id: str | None = None


class ErrorNoted(_Payload):
    kind: Literal[EventKind.ERROR] = EventKind.ERROR
    message: str = ""


class TimerRemark(BaseModel):
    """A reminder, an escalation or an on-call hand-over the clock sent a pending item for."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    item_id: str
    tool: str = ""
    after: str = ""
    targets: list[str] = Field(default_factory=list)
    #: Who may decide after an escalation (per channel).
    approvers: JsonObject | None = None


class QuestionRemark(BaseModel):
    """A running tool asked a person (an MCP elicitation: `pizzabot.agent.asking`): the question
    item made for it, or why none was (`refused`: the tool was answered "cancel")."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    call_id: str
    tool: str = ""
    message: str = ""
    item_id: str | None = None
    url: str | None = None
    refused: str | None = None


class Note(_Payload):
    """A remark on the run's log that changes nothing in it: the clock's reminders and
    escalations, and a running tool's questions."""

    kind: Literal[EventKind.NOTE] = EventKind.NOTE
    _omit_unset = frozenset({"reminder", "escalated", "on_call", "question"})
    reminder: TimerRemark | None = None
    escalated: TimerRemark | None = None
    #: The card was sent to whoever is on call now in a rota or shift group.
    on_call: TimerRemark | None = None
    question: QuestionRemark | None = None

    def stored(self) -> JsonObject:
        out = super().stored()
        if isinstance(out.get("question"), dict):
            out["question"] = {k: v for k, v in out["question"].items() if v is not None}
        for name in ("reminder", "escalated", "on_call"):
            if isinstance(out.get(name), dict) and out[name].get("approvers") is None:
                out[name].pop("approvers", None)
        return out


class RunFinished(_Payload):
    kind: Literal[EventKind.RUN_FINISHED] = EventKind.RUN_FINISHED
    status: RunStatus
    result: str | None = None
    error: str | None = None
    by: str | None = None


EventPayload = Annotated[
    RunStarted
    | UserMessage
    | ModelCall
    | AssistantMessage
    | ToolRequest
    | DecisionMade
    | ToolStarted
    | ToolResult
    | ToolInterrupted
    | BudgetReached
    | BudgetExtended
    | ErrorNoted
    | Note
    | RunFinished,
    Field(discriminator="kind"),
]

_PAYLOAD: TypeAdapter[EventPayload] = TypeAdapter(EventPayload)


def parse_payload(kind: str, data: Mapping[str, Any], *, version: int) -> EventPayload:
    """Check a stored payload against its kind; refuse a schema version this code does not
    know (pydantic's `ValidationError` for a payload that does not fit its kind)."""
    if version != EVENT_SCHEMA_VERSION:
        raise UnknownEventVersion(
            f"a {kind} event has schema version {version}; this server reads version "
            f"{EVENT_SCHEMA_VERSION}: upgrade Pizza Bot to read this log"
        )
    return _PAYLOAD.validate_python({**data, "kind": kind})


def load_event(
    *, run_id: str, seq: int, kind: str, data: Mapping[str, Any], at: datetime, version: int
) -> Event:
    """An event as read from the store: checked, typed."""
    try:
        payload = parse_payload(kind, data, version=version)
    except UnknownEventVersion as exc:
        raise UnknownEventVersion(f"event {seq} of run {run_id}: {exc}") from None
    return Event(run_id=run_id, seq=seq, payload=payload, at=at, version=version)


# -- the envelope of a payload, stored or not yet -------------------------------------------


@dataclass(frozen=True)
class Event:
    """One stored event; its payload is one of this module's models, checked when read
    (`load_event`)."""

    run_id: str
    seq: int
    payload: EventPayload
    at: datetime
    version: int = EVENT_SCHEMA_VERSION

    @property
    def kind(self) -> EventKind:
        return self.payload.kind

    @property
    def data(self) -> dict[str, Any]:
        """The payload as stored and as the API shows it."""
        return self.payload.stored()


@dataclass(frozen=True)
class NewEvent:
    """An event not yet stored: the store gives it its sequence number."""

    payload: EventPayload

    @property
    def kind(self) -> EventKind:
        return self.payload.kind

    @property
    def data(self) -> dict[str, Any]:
        return self.payload.stored()
