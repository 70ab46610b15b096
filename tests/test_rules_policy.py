"""The policy's answer for one call, from a skill file as written: the edges of JSON types a
rule must not blur, and the schema check of rule paths (nested models come as `$ref`)."""

from __future__ import annotations

import math
from typing import Any

import pytest

from pizzabot.agent.policy.rules import ToolHints, check_paths, judge
from pizzabot.agent.skills import Skill, parse_skill

HEAD = "name: shop\ninstructions: hi\nmodel: openai/gpt-4o\n"


def one_rule(when: str, policy: str = "auto") -> Skill:
    return parse_skill(
        HEAD
        + "tools:\n  shop.refund:\n    policy: ask\n    rules:\n"
        + f"      - when: {when}\n        policy: {policy}\n",
        "shop.yaml",
    )


@pytest.mark.parametrize(
    ("when", "args", "policy"),
    [
        ("{amount: {lte: 100}}", {"amount": 100}, "auto"),
        ("{amount: {lte: 100}}", {"amount": 1e2}, "auto"),
        ("{amount: {lte: 100}}", {"amount": "100"}, "ask"),
        ("{amount: {lte: 100}}", {"amount": False}, "ask"),
        ("{amount: {lte: 100}}", {"amount": math.nan}, "ask"),
        ("{amount: {lte: 100}}", {"amount": -math.inf}, "ask"),
        ("{amount: {lte: 100}}", {"amount": None}, "ask"),
        ("{amount: {lte: 100}}", {}, "ask"),
        ("{amount: {gt: 100}}", {"amount": 10**400}, "auto"),  # no float overflow
        ("{amount: 1}", {"amount": True}, "ask"),  # true is not 1
        ("{urgent: true}", {"urgent": 1}, "ask"),
        ("{urgent: true}", {"urgent": True}, "auto"),
        ("{amount: 1}", {"amount": 1.0}, "auto"),
        ("{code: '1'}", {"code": 1}, "ask"),
        ("{code: {in: [1, 2]}}", {"code": True}, "ask"),
        ("{code: {not_in: [1, 2]}}", {"code": 3}, "auto"),
        ("{code: {not_in: [1, 2]}}", {}, "ask"),  # absent matches only present: false
        ("{code: {ne: 1}}", {}, "ask"),
        ("{code: {present: false}}", {}, "auto"),
        ("{code: {present: false}}", {"code": None}, "auto"),
        ("{code: {present: true}}", {"code": ""}, "ask"),  # given, but empty: only maybe
        ("{code: {present: true}}", {"code": "A"}, "auto"),
        ("{ref: {matches: 'INV-[0-9]+'}}", {"ref": "INV-12"}, "auto"),
        ("{ref: {matches: 'INV-[0-9]+'}}", {"ref": "INV-12\\n"}, "ask"),
        ("{ref: {matches: 'INV-[0-9]+'}}", {"ref": "see INV-12"}, "ask"),
        ("{ref: {matches: '[0-9]+'}}", {"ref": 12}, "ask"),  # only strings match
        ("{customer.country: NL}", {"customer": {"country": "NL"}}, "auto"),
        ("{customer.country: NL}", {"customer": "NL"}, "ask"),
        ("{lines.0.sku: A1}", {"lines": [{"sku": "A1"}]}, "auto"),
        ("{tags: [a, b]}", {"tags": ["a", "b"]}, "auto"),
        ("{tags: [1]}", {"tags": [True]}, "ask"),
    ],
)
def test_a_rule_matches_only_what_it_says(when: str, args: dict[str, Any], policy: str) -> None:
    assert judge(one_rule(when), "shop.refund", args).policy == policy


def test_first_match_wins_and_the_ruling_says_which() -> None:
    skill = parse_skill(
        HEAD
        + "tools:\n"
        + "  shop.*:\n    policy: auto\n    rules:\n"
        + "      - {when: {amount: {gt: 10}}, policy: ask, reason: big}\n"
        + "      - {when: {amount: {gt: 5}}, policy: deny}\n",
        "shop.yaml",
    )
    assert str(judge(skill, "shop.refund", {"amount": 50})) == "ask: rule 1 of shop.*"
    assert judge(skill, "shop.refund", {"amount": 50}).reason == "big"
    assert str(judge(skill, "shop.refund", {"amount": 7})) == "deny: rule 2 of shop.*"
    assert str(judge(skill, "shop.refund", {"amount": 1})) == "auto: the policy of shop.*"
    assert str(judge(skill, "crm.send", {})) == "ask: a tool this skill does not list"


@pytest.mark.parametrize(
    ("hints", "policy"),
    [
        (ToolHints(read_only=True), "auto"),
        (ToolHints(read_only=True, destructive=False), "auto"),
        (ToolHints(read_only=True, destructive=True), "ask"),  # says both: not harmless
        (ToolHints(read_only=False, destructive=False), "ask"),
        (ToolHints(idempotent=True), "ask"),
        (None, "ask"),
    ],
)
def test_only_a_read_only_and_not_destructive_tool_runs_by_its_hints(
    hints: ToolHints | None, policy: str
) -> None:
    skill = parse_skill(HEAD + "defaults: {read_only: auto}\n", "shop.yaml")
    assert judge(skill, "shop.read", {}, hints).policy == policy


#: The shape pydantic (and so the MCP SDK) gives a tool with a nested model argument.
REFUND_SCHEMA: dict[str, Any] = {
    "type": "object",
    "$defs": {
        "Customer": {
            "type": "object",
            "properties": {"name": {"type": "string"}, "country": {"type": "string"}},
        }
    },
    "properties": {
        "amount": {"type": "number"},
        "customer": {"anyOf": [{"$ref": "#/$defs/Customer"}, {"type": "null"}]},
        "meta": {"type": "object", "additionalProperties": {"type": "string"}},
        "lines": {"type": "array", "items": {"$ref": "#/$defs/Customer"}},
    },
}


@pytest.mark.parametrize(
    ("path", "fine"),
    [
        ("amount", True),
        ("customer.country", True),
        ("meta.anything", True),
        ("lines.0.name", True),
        ("amout", False),
        ("customer.county", False),
        ("amount.cents", False),
        ("lines.0.sku", False),
    ],
)
def test_rule_paths_are_checked_against_the_tool_schema(path: str, fine: bool) -> None:
    skill = one_rule(f"{{{path}: x}}")
    problems = check_paths(skill, {"shop.refund": REFUND_SCHEMA, "shop.other": {}})
    if fine:
        assert problems == []
    else:
        (problem,) = problems
        assert problem.line == 8
        assert f"{path!r} is not an argument of shop.refund" in problem.message
