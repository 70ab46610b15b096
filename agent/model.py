"""The nouns of the engine as plain typed objects: runs, events, items, decisions, deliveries.

Everything that is stored is one of these. They carry no behaviour beyond small derived
properties; the state machine of a run lives in `transition`, the only place a run's status
may change.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, assert_never

# Re-exported: a delivery's target and ref are nouns of the engine like the others.
from pizzabot.agent.addresses import DeliveryRef as DeliveryRef
from pizzabot.agent.addresses import Target as Target

#: Version of the event payloads written by this code. Stored with every event; a reader
#: refuses versions it does not know instead of guessing.
EVENT_SCHEMA_VERSION = 1
#: The call id of a request's one call (`pizzabot.agent.requests`): what tells a request's
#: item from a run's.
REQUEST_CALL = "request"


class RunStatus(enum.StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    WAITING = "waiting"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"
    KILLED = "killed"

    @property
    def terminal(self) -> bool:
        return self in TERMINAL


TERMINAL = frozenset({RunStatus.DONE, RunStatus.FAILED, RunStatus.CANCELLED, RunStatus.KILLED})


class IllegalTransition(Exception):
    def __init__(self, current: RunStatus, target: RunStatus) -> None:
        super().__init__(f"a run cannot go from {current} to {target}")


def transition(current: RunStatus, target: RunStatus) -> RunStatus:
    """Return `target` when a run may move there from `current`, else raise.

    A finished run may be queued again by a follow-up message; that is the one way out of a
    terminal state.
    """
    allowed: frozenset[RunStatus]
    match current:
        case RunStatus.QUEUED:
            allowed = frozenset({RunStatus.RUNNING, RunStatus.CANCELLED, RunStatus.KILLED})
        case RunStatus.RUNNING:
            # RUNNING -> QUEUED: the worker gave the run back (shutdown, lease handed over).
            allowed = frozenset({RunStatus.WAITING, RunStatus.QUEUED, RunStatus.RUNNING} | TERMINAL)
        case RunStatus.WAITING:
            allowed = frozenset({RunStatus.QUEUED, RunStatus.CANCELLED, RunStatus.FAILED})
        case RunStatus.DONE | RunStatus.FAILED | RunStatus.CANCELLED | RunStatus.KILLED:
            allowed = frozenset({RunStatus.QUEUED})
        case _:
            assert_never(current)
    if target not in allowed:
        raise IllegalTransition(current, target)
    return target


class EventKind(enum.StrEnum):
    RUN_STARTED = "run_started"
    USER_MESSAGE = "user_message"
    MODEL_CALL = "model_call"
    ASSISTANT_MESSAGE = "assistant_message"
    TOOL_REQUEST = "tool_request"
    DECISION = "decision"
    TOOL_STARTED = "tool_started"
    TOOL_RESULT = "tool_result"
    TOOL_INTERRUPTED = "tool_interrupted"
    BUDGET_REACHED = "budget_reached"
    BUDGET_EXTENDED = "budget_extended"
    ERROR = "error"
    NOTE = "note"
    RUN_FINISHED = "run_finished"


@dataclass(frozen=True)
class Usage:
    tokens: int = 0
    cost_usd: float = 0.0
    steps: int = 0
    cost_known: bool = True


@dataclass(frozen=True)
class Run:
    id: str
    skill: str
    status: RunStatus
    input: str
    trigger: str
    created_at: datetime
    updated_at: datetime
    started_at: datetime | None = None
    finished_at: datetime | None = None
    result: str | None = None
    error: str | None = None
    usage: Usage = field(default_factory=Usage)
    lease_owner: str | None = None
    lease_expires_at: datetime | None = None
    # Extra budget granted by "extend" decisions on a budget item.
    budget_extra: dict[str, float] = field(default_factory=dict)
    killed_by: str | None = None


class Box(enum.StrEnum):
    ACTION = "action"
    UNREAD = "unread"


class ItemStatus(enum.StrEnum):
    PENDING = "pending"  # an action waiting for a decision
    APPROVED = "approved"
    EDITED = "edited"
    REJECTED = "rejected"
    EXPIRED = "expired"
    CANCELLED = "cancelled"  # the run ended before anyone decided
    UNREAD = "unread"
    READ = "read"


class ItemKind(enum.StrEnum):
    TOOL = "tool"  # approve / edit / reject a tool call
    BUDGET = "budget"  # approve = extend the budget, reject = stop the run
    QUESTION = "question"  # a person answers a form (or in words): ask_human, elicitation
    RUN = "run"  # an Unread note: the run finished, failed, was cancelled or killed


#: What a card says when a call is asked again after a crash lost the result of its start.
MAY_HAVE_HAPPENED = "it may already have happened: check before approving again"


#: What every card says above a preview: it was worked out before anyone decided, by a
#: dry run, and is not the call's result.
PREVIEW_LABEL = "Preview — computed before approval, not what ran"


@dataclass(frozen=True)
class Preview:
    """What a call would do, worked out when its card was made without running it
    (`pizzabot.agent.preview`): the tool's text, capped, from the tool's server, so
    hostile text to be shown as text. `failed`: no preview could be made; `text` says why."""

    text: str
    #: The tool that made it ("crm.refund_dry_run", "files.preview_write").
    by: str
    failed: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {"text": self.text, "by": self.by, "failed": self.failed}


@dataclass(frozen=True)
class Risk:
    """What a card says about a call: the skill's risk notes, and why a person is asked."""

    impact: str | None = None
    reversible: bool | None = None
    scope: str | None = None
    #: Asked again after a crash: the approved call started and its result was lost, so it
    #: may already have happened.
    may_have_happened: bool | None = None
    #: The tool's own MCP annotations in words ("read-only", "destructive"), shown where the
    #: skill gives no risk notes: the tool server's claims, not checked.
    hints: tuple[str, ...] = ()
    #: The rule that asked ("rule 2 of crm.refund", with its reason); None: the tool's policy.
    rule: str | None = None
    #: The grants the card offers next to Approve ("run", "1h", "exact"; see
    #: `pizzabot.agent.policy.grants`); empty: none.
    grants: tuple[str, ...] = ()
    #: How many different people must approve (None: one decides); `approved`: who has, in
    #: the current count ("alice via Slack"; see `pizzabot.agent.policy.quorum`).
    approvals_required: int | None = None
    approved: tuple[str, ...] = ()
    #: "passkey": an approval needs a fresh passkey assertion bound to this card
    #: (`pizzabot.agent.step_up`); None: a channel's button is enough.
    step_up: str | None = None
    #: What the call would do, shown on the card (`pizzabot.agent.preview`); None: no preview.
    preview: Preview | None = None
    #: What happens while nobody decides ("30m: sent to group:sre-leads, who may decide ·
    #: 2h: rejected"; `pizzabot.agent.escalation.plan_text`); None: nothing.
    ladder: str | None = None
    #: The ladder's steps and on-call hand-overs so far ("30m: sent to group:sre-leads
    #: (carol)", "on call in pager: alice"), oldest first.
    steps: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if isinstance(self.preview, dict):  # stored as JSON, read back as a mapping
            object.__setattr__(self, "preview", Preview(**self.preview))
        # Stored as a JSON list, read back as one.
        object.__setattr__(self, "steps", tuple(self.steps))
        object.__setattr__(self, "hints", tuple(self.hints))
        object.__setattr__(self, "grants", tuple(self.grants))
        object.__setattr__(self, "approved", tuple(self.approved))

    @property
    def approvals_text(self) -> str | None:
        """The count, as in "1 of 2 approved: alice via Slack", where more than one must approve."""
        required = self.approvals_required or 1
        if required <= 1:
            return None
        text = f"{len(self.approved)} of {required} approved"
        return f"{text}: {', '.join(self.approved)}" if self.approved else text

    def timing(self) -> list[tuple[str, str]]:
        """The escalation ladder and the steps taken so far, as labelled lines of a card."""
        said = [("If nobody decides", self.ladder), ("So far", " · ".join(self.steps))]
        return [(label, text) for label, text in said if text]

    @property
    def noted(self) -> bool:
        """The skill gave risk notes of its own."""
        return self.impact is not None or self.reversible is not None or self.scope is not None

    def as_dict(self) -> dict[str, Any]:
        lists = ("hints", "grants", "approved", "steps")
        out = {k: v for k, v in vars(self).items() if v is not None and k not in lists}
        if self.preview is not None:
            out["preview"] = self.preview.as_dict()
        for name in lists:
            if getattr(self, name):
                out[name] = list(getattr(self, name))
        return out


#: Where an FYI's Undo is: offered (nobody undid it yet), running (a person clicked it and
#: the compensating call is under way), done or failed (how that call ended).
UndoState = Literal["offered", "running", "done", "failed"]


@dataclass(frozen=True)
class Undo:
    """The Undo a `notify` FYI offers (`pizzabot.agent.undo`): the compensating call `tool`
    ("server.tool") with `args`, and once a person clicked it, who, how and when it ended
    (`outcome`: the tool's answer, or its error)."""

    tool: str
    args: dict[str, Any]
    state: UndoState = "offered"
    by: str | None = None
    via: str | None = None
    at: datetime | None = None
    outcome: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """The offer and its outcome as stored (the state is a column of its own)."""
        at = self.at.isoformat() if self.at is not None else None
        said = {"by": self.by, "via": self.via, "at": at, "outcome": self.outcome}
        return {"tool": self.tool, "args": self.args, **said}

    @classmethod
    def stored(cls, data: dict[str, Any], state: str) -> Undo:
        at = data.get("at")
        return cls(
            tool=data["tool"],
            args=dict(data.get("args") or {}),
            state=state,  # type: ignore[arg-type]
            by=data.get("by"),
            via=data.get("via"),
            at=datetime.fromisoformat(at) if at else None,
            outcome=data.get("outcome"),
        )


@dataclass(frozen=True)
class Item:
    id: str
    run_id: str
    skill: str
    box: Box
    kind: ItemKind
    status: ItemStatus
    title: str
    body: str
    created_at: datetime
    call_id: str | None = None
    tool: str | None = None  # "server.tool"
    args: dict[str, Any] | None = None  # proposed arguments
    schema: dict[str, Any] | None = None  # the tool's JSON input schema
    risk: Risk = field(default_factory=Risk)
    decided_by: str | None = None
    decided_via: str | None = None
    decided_at: datetime | None = None
    final_args: dict[str, Any] | None = None
    reason: str | None = None
    read_at: datetime | None = None
    # A random secret, used by channels that cannot authenticate the replier otherwise (email).
    secret: str = ""
    #: Bumped by every change to what the card shows (an edit on the way to two approvals):
    #: part of the card's digest (`pizzabot.agent.card_digest`).
    version: int = 1
    #: Who asked (`Principal.actor` of a request's filer, or of whoever started the run),
    #: as every card and the audit show it; `requester_person` the person that is, for the
    #: self-approval rules (`pizzabot.agent.policy.quorum.person_of`).
    requested_by: str | None = None
    requester_person: str | None = None
    #: The Undo of a `notify` FYI (`pizzabot.agent.undo`); None: it offers none.
    undo: Undo | None = None

    @property
    def decided(self) -> bool:
        return self.box is Box.ACTION and self.status is not ItemStatus.PENDING

    @property
    def requested(self) -> bool:
        """Asked by an agent Pizza Bot does not run (a request), not by a run's model."""
        return self.requested_by is not None and self.call_id == REQUEST_CALL

    @property
    def tool_place(self) -> tuple[str, str | None]:
        """The tool as a card names it, and the MCP server it is on. A run's tool is
        "server.tool"; a request's is the requester's own name, on no server of ours."""
        tool = self.tool or ""
        if self.requested:
            return tool, None
        server, _, name = tool.partition(".")
        return name or server, server


@dataclass(frozen=True)
class Approve:
    """`grant`: and don't ask again for this tool — "run", a duration the tool offers ("1h")
    or "exact" (see `pizzabot.agent.policy.grants`)."""

    grant: str | None = None
    kind: Literal["approve"] = "approve"


@dataclass(frozen=True)
class Edit:
    args: dict[str, Any]
    kind: Literal["edit"] = "edit"


@dataclass(frozen=True)
class Reject:
    reason: str = ""
    kind: Literal["reject"] = "reject"


@dataclass(frozen=True)
class Expired:
    """Nobody decided in time (the clock's decision); `halt` stops the run."""

    reason: str = ""
    halt: bool = False
    kind: Literal["expired"] = "expired"


#: What is decided on an item. A person approves, edits or rejects (`decision_from`); only
#: the clock expires an item (`pizzabot.agent.inbox.Inbox.expire`).
Decision = Approve | Edit | Reject | Expired

#: The status an item gets from each kind of decision.
DECIDED_STATUS = {
    "approve": ItemStatus.APPROVED,
    "edit": ItemStatus.EDITED,
    "reject": ItemStatus.REJECTED,
    "expired": ItemStatus.EXPIRED,
}


def decision_from(
    kind: str,
    *,
    args: dict[str, Any] | None = None,
    reason: str | None = None,
    grant: str | None = None,
) -> Decision:
    """Build a decision from the loose shape every channel receives (a grant goes only with
    an approval)."""
    if grant is not None and kind != "approve":
        raise ValueError(f"a grant goes with approve, not with {kind}")
    if kind == "approve":
        return Approve(grant=grant or None)
    if kind == "edit":
        return Edit(args=dict(args or {}))
    if kind == "reject":
        return Reject(reason=(reason or "").strip())
    raise ValueError(f"unknown decision {kind!r}: use approve, edit or reject")


class DeliveryStatus(enum.StrEnum):
    PENDING = "pending"
    SENT = "sent"
    FAILED = "failed"  # a dead letter: its send or an update gave up; never tried again


@dataclass(frozen=True)
class Delivery:
    id: str
    item_id: str
    run_id: str
    channel: str
    address: str
    status: DeliveryStatus
    attempts: int
    ref: DeliveryRef | None
    last_error: str | None
    needs_update: bool
    next_attempt_at: datetime | None
    created_at: datetime


@dataclass(frozen=True)
class AuditEntry:
    id: int
    at: datetime
    action: str
    actor: str
    channel: str
    run_id: str | None
    item_id: str | None
    detail: dict[str, Any]
