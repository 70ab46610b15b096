"""A2A's shapes and the requests' wire, translated once: a message to the person becomes a
`RequestBody`, and a request's `RequestState` becomes the A2A task it is.

    a data part {"tool", "args", "title"?, "schema"?, ...}   → an approval (text: its description)
    text parts only                                           → a question (the text)

    pending, halted     → input-required (the status message says what is awaited, and where)
    decided or expired  → completed, with a `decision` artifact: the request's state as data
                          (status, args, reason, decided_by, …) and one line of text

The task's id is the request's; its context id travels in the request's idempotency key
(`a2a:CONTEXT:MESSAGE`), so a message sent again is the same request, and the task keeps the
context the sender chose without a column of its own.
"""

from __future__ import annotations

import re
import uuid
from typing import Any

from a2a.types import (
    Artifact,
    Message,
    Part,
    Role,
    Task,
    TaskState,
    TaskStatus,
)
from google.protobuf.json_format import MessageToDict
from pydantic import ValidationError

from pizzabot.client.wire import MAX_TEXT, MAX_TITLE, RequestBody, RequestState

__all__ = [
    "KEY_PREFIX",
    "MessageRefused",
    "body_of",
    "context_of",
    "decision_artifact",
    "key_for",
    "task_of",
]

KEY_PREFIX = "a2a:"
#: An id the sender chose (message, context): kept in the idempotency key, so bounded.
_ID = re.compile(r"^[A-Za-z0-9._\-]{1,80}$")


class MessageRefused(ValueError):
    """The message cannot be a request: what is wrong, in words for the sender."""


def key_for(message: Message) -> tuple[str, str]:
    """The request's idempotency key and the task's context id, from the message's ids."""
    context = message.context_id or uuid.uuid4().hex
    for name, value in (("messageId", message.message_id), ("contextId", context)):
        if not _ID.match(value):
            raise MessageRefused(f"{name} must be 1 to 80 letters, digits, '.', '_' or '-'")
    return f"{KEY_PREFIX}{context}:{message.message_id}", context


def context_of(key: str | None, fallback: str) -> str:
    """The context id kept in a request's key (a request made elsewhere: its own id)."""
    if key is None or not key.startswith(KEY_PREFIX):
        return fallback
    return key[len(KEY_PREFIX) :].partition(":")[0] or fallback


def _whole_numbers(value: Any) -> Any:
    # A protobuf Value holds every number as a double: 3 arrives as 3.0.
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    if isinstance(value, dict):
        return {k: _whole_numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_whole_numbers(v) for v in value]
    return value


def body_of(message: Message, *, skill: str) -> RequestBody:
    """The request a message asks for, of `skill` (the one this agent files into)."""
    texts = [part.text for part in message.parts if part.WhichOneof("content") == "text"]
    data = [
        _whole_numbers(MessageToDict(part.data))
        for part in message.parts
        if part.WhichOneof("content") == "data"
    ]
    text = "\n".join(t.strip() for t in texts if t.strip())
    if len(data) > 1 or (data and not isinstance(data[0], dict)):
        raise MessageRefused("send at most one data part, a JSON object (tool, args, ...)")
    fields: dict[str, Any] = dict(data[0]) if data else {}
    if fields.get("skill", skill) != skill:
        raise MessageRefused(f"this agent asks in skill {skill!r}; send no other skill")
    if "callback_url" in fields:
        raise MessageRefused("no callback_url: follow the task (tasks/get or subscribe)")
    fields["skill"] = skill
    if "tool" in fields:
        fields.setdefault("title", str(fields["tool"])[:MAX_TITLE])
        if text:
            fields.setdefault("description", text[:MAX_TEXT])
    elif "question" in fields:
        fields.setdefault("title", (str(fields["question"]).splitlines() or [""])[0][:MAX_TITLE])
    else:
        if not text:
            raise MessageRefused("send text (a question) or a data part (tool and args)")
        fields["question"] = text
        fields.setdefault("title", text.splitlines()[0][:MAX_TITLE])
    try:
        return RequestBody.model_validate(fields)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'message'}: {e['msg']}" for e in exc.errors()
        )
        raise MessageRefused(problems) from None


def _agent_message(task_id: str, context_id: str, text: str, state: RequestState) -> Message:
    return Message(
        message_id=f"{task_id}-{state.status}",
        task_id=task_id,
        context_id=context_id,
        role=Role.ROLE_AGENT,
        parts=[Part(text=text), Part(data=_state_data(state))],
    )


def _state_data(state: RequestState) -> Any:
    from google.protobuf.struct_pb2 import Value

    value = Value()
    value.struct_value.update(state.model_dump(mode="json", exclude_none=True))
    return value


def waiting_text(state: RequestState) -> str:
    """What an `input-required` task says it waits for."""
    if state.status == "halted":
        return f"Halted, do not go ahead: {state.reason}. Ask again later."
    what = "answer" if state.kind == "question" else "decide"
    return f"Waiting for a person to {what} in Pizza Bot: {state.url}"


def decided_text(state: RequestState) -> str:
    """One line saying how a request was decided."""
    who = f" by {state.decided_by}" if state.decided_by else ""
    via = f" via {state.via}" if state.via else ""
    reason = f": {state.reason}" if state.reason else ""
    return f"{state.status.capitalize()}{who}{via}{reason}"


def task_of(state: RequestState, *, context_id: str) -> Task:
    """The A2A task a request is, as it stands."""
    if state.pending or state.status == "halted":
        message = _agent_message(state.id, context_id, waiting_text(state), state)
        return Task(
            id=state.id,
            context_id=context_id,
            status=TaskStatus(state=TaskState.TASK_STATE_INPUT_REQUIRED, message=message),
        )
    return Task(
        id=state.id,
        context_id=context_id,
        status=TaskStatus(
            state=TaskState.TASK_STATE_COMPLETED,
            message=_agent_message(state.id, context_id, decided_text(state), state),
        ),
        artifacts=[decision_artifact(state)],
    )


def decision_artifact(state: RequestState) -> Artifact:
    """The decision, as the task's one artifact."""
    return Artifact(
        artifact_id=f"{state.id}-decision",
        name="decision",
        parts=[Part(data=_state_data(state)), Part(text=decided_text(state))],
    )
