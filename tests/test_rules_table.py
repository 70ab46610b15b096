"""The rule table: what each operator makes of a value of its type, of another type, of text
that differs only in form, and of a value that is not there — for a `deny`, an `ask` and an
`auto` rule. Where a condition only may hold, a deny or ask rule applies and an auto rule
does not; a doubt never loosens a call."""

from __future__ import annotations

import itertools
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pizzabot.agent.errors import SkillError
from pizzabot.agent.policy.rules import Truth, judge, matches
from pizzabot.agent.skills import Skill, parse_skill

HEAD = "name: shop\ninstructions: hi\nmodel: openai/gpt-4o\n"
ABSENT = object()


def skill(when: str, policy: str, otherwise: str) -> Skill:
    return parse_skill(
        HEAD
        + f"tools:\n  shop.refund:\n    policy: {otherwise}\n    rules:\n"
        + f"      - when: {when}\n        policy: {policy}\n",
        "shop.yaml",
    )


def decided(when: str, value: Any, policy: str) -> str:
    """What one rule on `x` decides for `value`, under a policy that differs from it."""
    otherwise = "ask" if policy != "ask" else "auto"
    args = {} if value is ABSENT else {"x": value}
    ruling = judge(skill(when, policy, otherwise), "shop.refund", args)
    return "rule" if ruling.source == "rule" else "not"


#: (condition, value, holds): "yes", "no" or "maybe".
TABLE: list[tuple[str, Any, str]] = [
    # eq / in: exact for the rule's type; another type or another form of the text: maybe.
    ("{x: prod}", "prod", "yes"),
    ("{x: prod}", "staging", "no"),
    ("{x: prod}", "Prod", "maybe"),
    ("{x: prod}", " prod\t", "maybe"),
    ("{x: prod}", "ＰＲＯＤ", "maybe"),
    ("{x: prod}", "pro\u00addu\u200bct", "no"),
    ("{x: prod}", "pro\u200bd", "maybe"),
    ("{x: prod}", ["prod"], "maybe"),
    ("{x: prod}", 1, "maybe"),
    ("{x: prod}", ABSENT, "no"),
    ("{x: prod}", None, "no"),
    ("{x: {in: [EUR, USD]}}", "usd", "maybe"),
    ("{x: {in: [EUR, USD]}}", "GBP", "no"),
    ("{x: {in: [1, two]}}", "three", "no"),  # text, and the rule has text: compared
    ("{x: {in: [1, two]}}", True, "maybe"),
    ("{x: 1}", 1.0, "yes"),
    ("{x: 1}", True, "maybe"),
    ("{x: 1}", "1", "maybe"),
    ("{x: true}", 1, "maybe"),
    ("{x: null}", None, "yes"),
    ("{x: null}", ABSENT, "maybe"),
    ("{x: null}", "", "no"),
    ("{x: [a, b]}", ["a", "b"], "yes"),
    ("{x: [a, b]}", ["A", "b"], "maybe"),
    ("{x: [a, b]}", ["a"], "no"),
    ("{x: [1]}", [True], "maybe"),
    # ne / not_in: the negation, and maybe for a value they cannot see.
    ("{x: {ne: prod}}", "staging", "yes"),
    ("{x: {ne: prod}}", "prod", "no"),
    ("{x: {ne: prod}}", "Prod", "maybe"),
    ("{x: {ne: prod}}", 7, "maybe"),
    ("{x: {ne: prod}}", ABSENT, "maybe"),
    ("{x: {ne: prod}}", None, "maybe"),
    ("{x: {ne: null}}", None, "no"),
    ("{x: {ne: null}}", "a", "yes"),
    ("{x: {not_in: [NL, BE]}}", "FR", "yes"),
    ("{x: {not_in: [NL, BE]}}", "NL", "no"),
    ("{x: {not_in: [NL, BE]}}", "nl", "maybe"),
    ("{x: {not_in: [NL, BE]}}", ABSENT, "maybe"),
    # numbers: a finite JSON number, else maybe; nothing there: no.
    ("{x: {gt: 1000}}", 5000, "yes"),
    ("{x: {gt: 1000}}", 500, "no"),
    ("{x: {gt: 1000}}", 10**400, "yes"),
    ("{x: {gt: 1000}}", "5000", "maybe"),
    ("{x: {gt: 1000}}", "500", "maybe"),
    ("{x: {gt: 1000}}", True, "maybe"),
    ("{x: {gt: 1000}}", math.inf, "maybe"),
    ("{x: {gt: 1000}}", math.nan, "maybe"),
    ("{x: {gt: 1000}}", [5000], "maybe"),
    ("{x: {gt: 1000}}", ABSENT, "no"),
    ("{x: {gt: 1000}}", None, "no"),
    ("{x: {gt: 0, lte: 100}}", 50, "yes"),
    ("{x: {gt: 0, lte: 100}}", 500, "no"),
    ("{x: {gt: 0, lte: 100}}", "50", "maybe"),
    # matches: the whole text; in another form of it, maybe.
    ("{x: {matches: 'INV-[0-9]+'}}", "INV-12", "yes"),
    ("{x: {matches: 'INV-[0-9]+'}}", "inv-12", "maybe"),
    ("{x: {matches: 'INV-[0-9]+'}}", "INV-12\n", "maybe"),
    ("{x: {matches: 'INV-[0-9]+'}}", "see INV-12", "no"),
    ("{x: {matches: '[0-9]+'}}", 12, "maybe"),
    ("{x: {matches: '[0-9]+'}}", ABSENT, "no"),
    # present: null counts as not there; given but blank is a maybe either way.
    ("{x: {present: true}}", "a", "yes"),
    ("{x: {present: true}}", 0, "yes"),
    ("{x: {present: true}}", False, "yes"),
    ("{x: {present: true}}", ABSENT, "no"),
    ("{x: {present: true}}", None, "no"),
    ("{x: {present: true}}", "", "maybe"),
    ("{x: {present: true}}", "  ", "maybe"),
    ("{x: {present: true}}", [], "maybe"),
    ("{x: {present: false}}", ABSENT, "yes"),
    ("{x: {present: false}}", None, "yes"),
    ("{x: {present: false}}", "", "maybe"),
    ("{x: {present: false}}", {}, "maybe"),
    ("{x: {present: false}}", "a", "no"),
    # nested paths: a path into something else is not there.
    ("{x.country: NL}", {"country": "NL"}, "yes"),
    ("{x.country: NL}", {"country": "nl"}, "maybe"),
    ("{x.country: NL}", "NL", "no"),
]


@pytest.mark.parametrize(("when", "value", "truth"), TABLE)
def test_a_deny_or_ask_rule_applies_when_its_condition_may_hold_and_auto_only_when_it_does(
    when: str, value: Any, truth: str
) -> None:
    for policy in ("deny", "ask"):
        assert decided(when, value, policy) == ("not" if truth == "no" else "rule"), policy
    assert decided(when, value, "auto") == ("rule" if truth == "yes" else "not")


def test_a_maybe_says_why_on_the_card_and_to_the_model() -> None:
    rules = skill("{amount: {gt: 1000}}", "deny", "auto")

    ruling = judge(rules, "shop.refund", {"amount": "5000"})

    assert str(ruling) == "deny: rule 1 of shop.refund"
    assert ruling.doubt == "amount is the text '5000', and the rule compares numbers"
    assert ruling.reason == ruling.doubt
    assert ruling.doubt in ruling.refusal()
    assert judge(rules, "shop.refund", {"amount": 5000}).doubt is None


def test_a_maybe_ask_gives_way_to_a_later_deny_and_a_maybe_auto_to_what_follows() -> None:
    rules = parse_skill(
        HEAD
        + "tools:\n  shop.refund:\n    policy: auto\n    rules:\n"
        + "      - {when: {amount: {lte: 100}}, policy: auto}\n"
        + "      - {when: {amount: {lte: 500}}, policy: ask, reason: a look}\n"
        + "      - {when: {amount: {gt: 1000}}, policy: deny, reason: finance}\n",
        "shop.yaml",
    )

    def ruled(amount: Any) -> str:
        return str(judge(rules, "shop.refund", {"amount": amount}))

    assert ruled(50) == "auto: rule 1 of shop.refund"
    assert ruled(300) == "ask: rule 2 of shop.refund"
    assert ruled(800) == "auto: the policy of shop.refund"
    assert ruled(5000) == "deny: rule 3 of shop.refund"
    # Text may be any amount: rule 1 does not apply, rule 2 would ask, rule 3 denies.
    assert ruled("50") == "deny: rule 3 of shop.refund"

    ask_last = parse_skill(
        HEAD
        + "tools:\n  shop.refund:\n    policy: auto\n    rules:\n"
        + "      - {when: {amount: {lte: 100}}, policy: auto}\n"
        + "      - {when: {amount: {gt: 100}}, policy: ask, reason: a look}\n",
        "shop.yaml",
    )
    ruling = judge(ask_last, "shop.refund", {"amount": "50"})
    assert str(ruling) == "ask: rule 2 of shop.refund"
    assert ruling.reason == "a look (amount is the text '50', and the rule compares numbers)"


def test_runs_cannot_decide_auto_and_says_so_at_its_line() -> None:
    text = (
        HEAD
        + "tools:\n  shell.run:\n    rules:\n"
        + "      - {when: {command: {runs: ls}}, policy: auto}\n"
    )
    with pytest.raises(SkillError) as refused:
        parse_skill(text, "shell.yaml")
    assert refused.value.line == 7
    assert "cannot prove a command line harmless" in str(refused.value)

    for bad, said in (("'rm -r /; ls'", "is not one command"), ("'$X -rf /'", "plain words")):
        with pytest.raises(SkillError, match=said):
            parse_skill(
                HEAD + f"tools:\n  shell.run:\n    rules:\n"
                f"      - {{when: {{command: {{runs: {bad}}}}}, policy: deny}}\n",
                "shell.yaml",
            )


# -- a doubt never loosens a call ------------------------------------------------------------

CONDITIONS = [
    "{x: {gt: 10}}",
    "{x: {lte: 10}}",
    "{x: a}",
    "{x: {ne: a}}",
    "{x: {in: [a, 1]}}",
    "{x: {not_in: [a, b]}}",
    "{x: {matches: '[a-z]+'}}",
    "{x: {present: true}}",
    "{x: {present: false}}",
]
VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-20, 20),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(["a", "A", " a", "b", "", "1", "10", "ａ"]),
    st.lists(st.sampled_from(["a", 1]), max_size=2),
)
STRICT = {"auto": 0, "ask": 1, "deny": 2}


@settings(max_examples=300, deadline=None)
@given(
    rules=st.lists(
        st.tuples(st.sampled_from(CONDITIONS), st.sampled_from(["auto", "ask", "deny"])),
        min_size=1,
        max_size=4,
    ),
    otherwise=st.sampled_from(["auto", "ask", "deny"]),
    value=st.one_of(st.just(ABSENT), VALUES),
)
def test_the_ruling_is_the_strictest_outcome_of_any_reading_of_the_doubts(
    rules: list[tuple[str, str]], otherwise: str, value: Any
) -> None:
    """Each maybe may be read as holding or not: the ruling is as strict as the strictest
    first-match outcome of all those readings, and never stricter than needed."""
    text = HEAD + f"tools:\n  shop.refund:\n    policy: {otherwise}\n    rules:\n"
    text += "".join(f"      - {{when: {w}, policy: {p}}}\n" for w, p in rules)
    parsed = parse_skill(text, "shop.yaml")
    args = {} if value is ABSENT else {"x": value}
    entry = parsed.rule("shop.refund")
    truths = [matches(rule, args).truth for rule in entry.rules]
    doubts = [i for i, t in enumerate(truths) if t is Truth.MAYBE]

    outcomes = []
    for reading in itertools.product((True, False), repeat=len(doubts)):
        holds = dict(zip(doubts, reading, strict=True))
        first = next(
            (
                rule.policy
                for i, rule in enumerate(entry.rules)
                if truths[i] is Truth.YES or holds.get(i, False)
            ),
            otherwise,
        )
        outcomes.append(first)

    ruled = judge(parsed, "shop.refund", args).policy
    assert STRICT[ruled] == max(STRICT[o] for o in outcomes)
