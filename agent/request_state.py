"""What an agent asks (`NewRequest`), and where its request stands, read from its item: the
one shape the API answers with, the MCP tools translate and a callback posts
(`RequestState`), and a decision in words.

A pending request is `halted` while the kill switch is on: its agent must not go ahead, and
no decision is taken until the switch is lifted.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any, Literal

from pizzabot.agent.model import Item, ItemStatus, Risk
from pizzabot.agent.store import StoredRequest, kill_reason

__all__ = ["NewRequest", "RequestState", "outcome_text", "state_of"]

_APPROVAL_STATUS = {
    ItemStatus.PENDING: "pending",
    ItemStatus.APPROVED: "approved",
    ItemStatus.EDITED: "edited",
    ItemStatus.REJECTED: "rejected",
    ItemStatus.EXPIRED: "expired",
    ItemStatus.CANCELLED: "expired",
}
_QUESTION_STATUS = {
    ItemStatus.PENDING: "pending",
    ItemStatus.APPROVED: "answered",
    ItemStatus.EDITED: "answered",
    ItemStatus.REJECTED: "declined",
    ItemStatus.EXPIRED: "expired",
    ItemStatus.CANCELLED: "expired",
}


@dataclass(frozen=True)
class NewRequest:
    """What an agent asks. `tool` None: a question (`question` is the text asked)."""

    skill: str
    title: str
    tool: str | None = None
    args: dict[str, Any] = field(default_factory=dict)
    schema: dict[str, Any] | None = None
    risk: Risk | None = None
    description: str | None = None
    #: Seconds; the item expires after it (else the skill's `timeout` for the tool).
    timeout: float | None = None
    callback_url: str | None = None
    question: str | None = None
    #: The agent's own text of what the call would do, shown on the card as its word
    #: (`pizzabot.agent.preview.requested_preview`); None: no preview.
    preview: str | None = None

    @property
    def kind(self) -> Literal["approval", "question"]:
        return "approval" if self.tool is not None else "question"

    def body_hash(self) -> str:
        """SHA-256 of the request's canonical JSON: what tells a repeat from another request."""
        fields = asdict(self)
        if fields["preview"] is None:
            del fields["preview"]  # a request without one keeps the hash it is stored with
        canonical = json.dumps(
            fields, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str
        )
        return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class RequestState:
    """Where a request stands: `status` pending, then approved|edited|rejected|expired (an
    approval) or answered|declined|expired (a question); `args` the arguments to run with
    (approved or edited) or the answer (answered)."""

    id: str
    item_id: str
    run_id: str
    skill: str
    kind: Literal["approval", "question"]
    status: str
    args: dict[str, Any] | None
    reason: str | None
    decided_by: str | None
    via: str | None
    decided_at: datetime | None
    url: str
    #: Who asked (`Principal.actor`).
    requested_by: str | None = None
    #: When it was asked.
    created_at: datetime | None = None

    @property
    def pending(self) -> bool:
        return self.status == "pending"


def state_of(
    request: StoredRequest,
    item: Item,
    *,
    base_url: str = "",
    kill: dict[str, Any] | None = None,
) -> RequestState:
    """A request's state, read from its item; a pending one is `halted` while the kill
    switch (`kill`) is on, with the kill's reason."""
    table = _QUESTION_STATUS if request.kind == "question" else _APPROVAL_STATUS
    status = table.get(item.status, "pending")
    accepted = item.status in (ItemStatus.APPROVED, ItemStatus.EDITED)
    reason = item.reason
    if status == "pending" and kill is not None:
        status, reason = "halted", f"the kill switch is on ({kill_reason(kill)})"
    return RequestState(
        id=request.id,
        item_id=item.id,
        run_id=request.run_id,
        skill=request.skill,
        kind=request.kind,
        status=status,
        args=dict(item.final_args or {}) if accepted else None,
        reason=reason,
        decided_by=item.decided_by if item.decided else None,
        via=item.decided_via if item.decided else None,
        decided_at=item.decided_at if item.decided else None,
        url=f"{base_url.rstrip('/')}/items/{item.id}",
        requested_by=item.requested_by,
        created_at=request.created_at,
    )


def outcome_text(item: Item) -> str:
    """A request's run's result, in words: the decision, who made it, and what it carries."""
    who = f" by {item.decided_by}" if item.decided_by else ""
    via = f" via {item.decided_via}" if item.decided_via else ""
    text = f"{item.status}{who}{via}"
    if item.status is ItemStatus.EDITED:
        text += f": {json.dumps(item.final_args, ensure_ascii=False)[:2000]}"
    elif item.reason:
        text += f": {item.reason}"
    return text
