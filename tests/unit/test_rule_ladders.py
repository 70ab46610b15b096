"""A rule of a tool may carry its own escalation ladder: parsed and refused like the tool's,
used for a card that rule asked about, and the tool's ladder for every other card."""

from __future__ import annotations

import textwrap
from datetime import UTC, datetime, timedelta

import pytest

from pizzabot.agent.escalation import ladder, plan_text
from pizzabot.agent.model import Box, Item, ItemKind, ItemStatus
from pizzabot.agent.policy import Access, Principal, judge
from pizzabot.agent.policy.call_verdict import call_verdict
from pizzabot.agent.policy.rules import asking_rule
from pizzabot.agent.skills import SkillBook, SkillFileError, parse_skill

PEOPLE = """\
people:
  alice: {slack: UA, email: alice@example.test}
  carol: {email: carol@example.test}
  dan: {email: dan@example.test}
groups: {leads: [carol]}
approvers: [alice]
"""

SKILL = PEOPLE + textwrap.dedent("""\
    name: pay
    tools:
      bank.transfer:
        policy: ask
        escalate: [{after: 4h, to: dan}, {after: 8h, then: reject}]
        rules:
          - when: {amount: {gt: 10000}}
            policy: ask
            reason: a large transfer
            remind_after: 10m
            escalate:
              - {after: 30m, to: group:leads}
              - {after: 1h, then: halt}
          - when: {amount: {gt: 1000}}
            policy: ask
    """)

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


def card(amount: int) -> Item:
    return Item(
        id="i1",
        run_id="r1",
        skill="pay",
        box=Box.ACTION,
        kind=ItemKind.TOOL,
        status=ItemStatus.PENDING,
        title="t",
        body="",
        created_at=T0,
        tool="bank.transfer",
        args={"amount": amount},
    )


def test_the_rule_that_asked_brings_its_own_ladder() -> None:
    skill = parse_skill(SKILL, "skills/pay.yaml")
    entry = skill.rule("bank.transfer")
    big = asking_rule(skill, "bank.transfer", {"amount": 50_000})
    assert big == 1
    rungs = ladder(entry.asked_by(big))
    assert [(r.key, r.after, r.act, r.halt) for r in rungs] == [
        ("remind", 600, "remind", False),
        ("step1", 1800, "widen", False),
        ("step2", 3600, "end", True),
    ]
    assert plan_text(entry.asked_by(big)) == (
        "10m: reminder · 30m: sent to group:leads, who may decide · 1h: the run stops"
    )
    # A rule without a ladder, and the tool's own policy, keep the tool's.
    tools = "4h: sent to dan, who may decide · 8h: rejected"
    middle = asking_rule(skill, "bank.transfer", {"amount": 5_000})
    assert middle == 2 and plan_text(entry.asked_by(middle)) == tools
    assert asking_rule(skill, "bank.transfer", {"amount": 5}) is None
    assert plan_text(entry.asked_by(None)) == tools


def test_the_card_shows_the_asking_rules_ladder() -> None:
    skill = parse_skill(SKILL, "skills/pay.yaml")
    big = call_verdict(skill, "bank.transfer", {"amount": 50_000})
    assert big.ruling == judge(skill, "bank.transfer", {"amount": 50_000})
    assert big.risk.ladder == (
        "10m: reminder · 30m: sent to group:leads, who may decide · 1h: the run stops"
    )
    small = call_verdict(skill, "bank.transfer", {"amount": 5})
    assert small.risk.ladder == "4h: sent to dan, who may decide · 8h: rejected"


def test_the_people_a_rules_ladder_widens_to_decide_from_that_step() -> None:
    skill = parse_skill(SKILL, "skills/pay.yaml")
    now = [T0 + timedelta(minutes=29)]
    access = Access(skills=SkillBook({"pay": skill}), clock=lambda: now[0])
    carol, dan = (
        Principal.of("email", "carol@example.test"),
        Principal.of("email", "dan@example.test"),
    )
    big, small = card(50_000), card(5)
    assert not access.may_decide(carol, big)
    now[0] = T0 + timedelta(minutes=30)
    assert access.may_decide(carol, big) and not access.may_decide(carol, small)
    now[0] = T0 + timedelta(hours=4)
    # The tool's ladder widens to dan for the small card only.
    assert access.may_decide(dan, small) and not access.may_decide(dan, big)


@pytest.mark.parametrize(
    ("rule", "said"),
    [
        (
            "{when: {amount: {gt: 1}}, policy: ask, "
            "escalate: [{after: 2h, then: reject}, {after: 3h, remind: true}]}",
            "rules.0: Value error, escalate: only the last step may end the card",
        ),
        (
            "{when: {amount: {gt: 1}}, policy: ask, "
            "escalate: [{after: 2h, remind: true}, {after: 1h, remind: true}]}",
            "escalate: list the steps in the order of their after",
        ),
        (
            "{when: {amount: {gt: 1}}, policy: ask, timeout: 1h, "
            "escalate: [{after: 2h, then: halt}]}",
            "a step with then: and timeout: both end the card",
        ),
        (
            "{when: {amount: {gt: 1}}, policy: auto, escalate: [{after: 1h, remind: true}]}",
            "give them to a rule whose policy is ask",
        ),
        ("{when: {amount: {gt: 1}}, policy: ask, on_timeout: halt}", "on_timeout needs timeout"),
        ("{when: {amount: {gt: 1}}, policy: ask, timeout: soon}", "'soon' is not a duration"),
        (
            "{when: {amount: {gt: 1}}, policy: ask, escalate: [{after: 1h, to: group:cto}]}",
            "'group:cto' is not a group",
        ),
    ],
)
def test_a_bad_rule_ladder_is_refused_at_load(rule: str, said: str) -> None:
    text = PEOPLE + f"name: pay\ntools:\n  bank.transfer:\n    rules:\n      - {rule}\n"
    with pytest.raises(SkillFileError) as caught:
        parse_skill(text, "skills/pay.yaml")
    shown = str(caught.value)
    assert shown.startswith("skills/pay.yaml:") and "tools.bank.transfer.rules.0" in shown
    assert said in shown
