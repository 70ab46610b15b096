"""The policy replay (`pizzabot.agent.policy.replay`): how a run's log says each call was
settled, and which changes of a proposed skill widen access."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from pizzabot.agent.events import (
    AssistantMessage,
    DecisionMade,
    Event,
    ProposedCall,
    ToolRequest,
    ToolResult,
    ToolStarted,
)
from pizzabot.agent.model import REQUEST_CALL, Approve, Reject
from pizzabot.agent.policy.replay import RecordedCall, recorded_calls, replay
from pizzabot.agent.skills import Skill

AT = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)
MAIL = {"to": "ann@example.com"}


def skill(tools: dict[str, Any], name: str = "shop", **more: Any) -> Skill:
    return Skill.model_validate(
        {"name": name, "instructions": "x", "model": "openai/none", "tools": tools, **more}
    )


def log(*payloads: Any) -> list[Event]:
    return [Event("r1", n, p, AT) for n, p in enumerate(payloads, 1)]


def call(tool: str, then: Any, **kw: Any) -> RecordedCall:
    return RecordedCall("r1", "c1", "shop", tool, kw.pop("args", MAIL), AT, then, **kw)


def test_a_runs_log_says_how_each_call_was_settled() -> None:
    proposed = AssistantMessage(
        tool_calls=[
            ProposedCall(id="a", name="crm__send_email", arguments=MAIL),
            ProposedCall(id="b", name="crm__lookup", arguments={"q": "x"}),
            ProposedCall(id="c", name="crm__wipe", arguments={}),
            ProposedCall(id="d", name="crm__send_email", arguments={"to": "bob@example.com"}),
            ProposedCall(id="e", name="crm__nope", arguments={}),
        ]
    )
    events = log(
        proposed,
        ToolRequest(call_id="a", item_id="i1", tool="crm.send_email", args=MAIL),
        ToolStarted(call_id="b", tool="crm.lookup", args={"q": "x"}),
        ToolResult(call_id="c", tool="crm.wipe", denied_by="the policy of crm.wipe"),
        ToolStarted(call_id="d", tool="crm.send_email", grant="g1"),
        ToolResult(call_id="e", tool="crm.nope", text="there is no tool named 'crm__nope'"),
        ToolStarted(call_id="a", tool="crm.send_email", args=MAIL, item_id="i1"),
    )
    calls = recorded_calls("r1", "shop", events, {"i1": 2})
    seen = [(c.call_id, c.tool, c.then, c.granted, c.approvals) for c in calls]
    assert seen == [
        ("a", "crm.send_email", "ask", False, 2),
        ("b", "crm.lookup", "auto", False, 1),
        ("c", "crm.wipe", "deny", False, 1),
        ("d", "crm.send_email", "ask", True, 1),
    ]
    assert calls[3].args == {"to": "bob@example.com"}  # the proposal, from the model's message


def test_a_request_decided_on_arrival_is_recorded_as_the_rules_said() -> None:
    def request(decision: Any, channel: str) -> RecordedCall:
        events = log(
            ToolRequest(call_id=REQUEST_CALL, item_id="i1", tool="deploy.run", args={"env": "x"}),
            DecisionMade(item_id="i1", call_id=REQUEST_CALL, decision=decision, channel=channel),
        )
        (found,) = recorded_calls("r1", "ops", events, {})
        assert found.request and found.args == {"env": "x"}
        return found

    assert request(Approve(), "policy").then == "auto"
    assert request(Reject("frozen"), "policy").then == "deny"
    granted = request(Approve(), "grant")
    assert (granted.then, granted.granted) == ("ask", True)
    assert request(Approve(), "api").then == "ask"  # a person decided: it was asked
    question = log(ToolRequest(call_id=REQUEST_CALL, item_id="i2", tool="ask_human"))
    assert recorded_calls("r1", "ops", question, {}) == []  # always asked: no rule judged it


def test_fewer_approvers_widens_and_more_narrows() -> None:
    two = call("crm.send_email", "ask", approvals=2)
    one = replay([two], {"shop": skill({"crm.send_email": "ask"})})
    (change,) = one.changes
    assert (change.kind, change.then, change.now, change.widens) == (
        "fewer approvals", "asked (2 people)", "asked", True,
    )  # fmt: skip
    more = {"crm.send_email": {"policy": "ask", "approvals": {"required": 3}}}
    (change,) = replay([two], {"shop": skill(more)}).changes
    assert (change.kind, change.now, change.widens) == ("more approvals", "asked (3 people)", False)


def test_a_call_a_grant_covered_counts_as_asked() -> None:
    covered = call("crm.send_email", "ask", granted=True)
    assert replay([covered], {"shop": skill({"crm.send_email": "ask"})}).changes == []
    (change,) = replay([covered], {"shop": skill({"crm.send_email": "auto"})}).changes
    assert change.then == "asked (a grant covered it)" and change.widens


def test_a_call_that_ran_by_its_hints_replays_as_read_only() -> None:
    hinted = call("crm.lookup", "auto", harmless=True, args={"q": "x"})
    opted_in = skill({}, defaults={"read_only": "auto"})
    assert replay([hinted], {"shop": opted_in}).changes == []
    (change,) = replay([hinted], {"shop": skill({})}).changes
    assert (change.kind, change.why) == ("auto → asked", "a tool this skill does not list")


def test_calls_of_a_skill_the_proposal_drops_are_counted_not_replayed() -> None:
    result = replay([call("crm.send_email", "ask")], {"other": skill({}, "other")})
    assert (result.calls, dict(result.missing), result.widens) == (0, {"shop": 1}, False)
