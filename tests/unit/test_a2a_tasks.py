"""A2A messages as requests, and requests as A2A tasks (`pizzabot.channels.a2a.tasks`): what
another agent may send, what it is refused, and what it reads back."""

from __future__ import annotations

from typing import Any

import pytest
from a2a.types import Message, Part, Role, TaskState
from google.protobuf.json_format import MessageToDict
from google.protobuf.struct_pb2 import Value

from pizzabot.channels.a2a.tasks import MessageRefused, body_of, context_of, key_for, task_of
from pizzabot.client.wire import RequestState


def data(value: Any) -> Part:
    v = Value()
    if isinstance(value, dict):
        v.struct_value.update(value)
    else:
        v.string_value = str(value)
    return Part(data=v)


def message(*parts: Part, message_id: str = "m1", context_id: str = "") -> Message:
    return Message(
        message_id=message_id, context_id=context_id, role=Role.ROLE_USER, parts=list(parts)
    )


def test_a_data_part_is_an_approval_with_whole_numbers_kept_whole() -> None:
    body = body_of(
        message(data({"tool": "scale", "args": {"replicas": 3, "ratio": 0.5}}), Part(text="Why")),
        skill="ops",
    )
    assert (body.skill, body.tool, body.title, body.description) == ("ops", "scale", "scale", "Why")
    assert body.args == {"replicas": 3, "ratio": 0.5}
    assert isinstance(body.args["replicas"], int)


def test_text_alone_is_a_question_titled_by_its_first_line() -> None:
    body = body_of(message(Part(text="Which region?\nEU or US.")), skill="ops")
    assert (body.kind, body.title, body.question) == (
        "question",
        "Which region?",
        "Which region?\nEU or US.",
    )


@pytest.mark.parametrize(
    ("parts", "says"),
    [
        ((), "send text"),
        ((data({"tool": "a"}), data({"tool": "b"})), "at most one data part"),
        ((data("just a string"),), "at most one data part"),
        ((data({"tool": "a", "skill": "other"}),), "send no other skill"),
        ((data({"tool": "a", "callback_url": "http://x.test/"}),), "no callback_url"),
        ((data({"tool": "a", "args": {}, "surprise": 1}),), "surprise"),
        ((data({"tool": "a", "timeout": 10**9}),), "timeout"),
    ],
)
def test_what_cannot_be_a_request_is_refused_in_words(parts: tuple[Part, ...], says: str) -> None:
    with pytest.raises(MessageRefused, match=says):
        body_of(message(*parts), skill="ops")


def test_the_ids_the_sender_chose_are_bounded_and_kept_in_the_key() -> None:
    key, context = key_for(message(message_id="m-1", context_id="ctx.7"))
    assert (key, context) == ("a2a:ctx.7:m-1", "ctx.7")
    assert context_of(key, "fallback") == "ctx.7"
    assert context_of(None, "req-1") == "req-1"
    assert context_of("someone-else's-key", "req-1") == "req-1"
    for bad in ("", "a:b", "x" * 81, "new\nline"):
        with pytest.raises(MessageRefused):
            key_for(message(message_id=bad))
    # No context: a new one, the same for the task and its key.
    key, context = key_for(message(message_id="m-2"))
    assert key == f"a2a:{context}:m-2"


def state(status: str, **more: Any) -> RequestState:
    return RequestState(
        id="r1", item_id="i1", kind="approval", status=status, url="http://pb.test/items/i1", **more
    )


def test_a_pending_request_is_input_required_saying_where_the_card_is() -> None:
    task = task_of(state("pending"), context_id="c1")
    assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert (task.id, task.context_id) == ("r1", "c1")
    assert task.status.message.parts[0].text.endswith("http://pb.test/items/i1")
    halted = task_of(state("halted", reason="the kill switch is on (drill)"), context_id="c1")
    assert halted.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert "do not go ahead" in halted.status.message.parts[0].text


def test_a_decided_request_is_completed_with_the_decision_as_its_artifact() -> None:
    task = task_of(
        state("rejected", reason="not on Friday", decided_by="ann", via="slack"), context_id="c"
    )
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    [artifact] = task.artifacts
    assert artifact.name == "decision"
    got = MessageToDict(artifact.parts[0].data)
    assert (got["status"], got["reason"], got["decided_by"]) == ("rejected", "not on Friday", "ann")
    assert artifact.parts[1].text == "Rejected by ann via slack: not on Friday"
