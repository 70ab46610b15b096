"""`notify` among the policies, and delegation in the policy's answer: the one verdict says
notify only where a rule surely holds and no deny wins; a delegate may decide what the away
person may, while they are away, and nothing else."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from pizzabot.agent.model import Box, Item, ItemKind, ItemStatus
from pizzabot.agent.policy.access import Access
from pizzabot.agent.policy.away import Away, AwayAccess, acting_for
from pizzabot.agent.policy.call_verdict import call_verdict
from pizzabot.agent.policy.principal import Principal, Scope
from pizzabot.agent.skills import SkillBook, parse_skill

HEAD = "name: shop\ninstructions: hi\nmodel: openai/gpt-4o\n"
T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


def shop(tools: str) -> SkillBook:
    skill = parse_skill(HEAD + tools, "shop.yaml")
    return SkillBook({skill.name: skill})


NOTIFY = """tools:
  shop.refund:
    policy: ask
    rules:
      - when: {amount: {gt: 5000}}
        policy: deny
      - when: {amount: {lte: 10}}
        policy: auto
      - when: {currency: GBP}
        policy: notify
        reason: pounds are told
"""


@pytest.mark.parametrize(
    ("args", "outcome"),
    [
        ({"amount": 40}, "ask"),
        ({"amount": 6000}, "deny"),  # a deny rule still wins
        ({"amount": "6000"}, "deny"),  # a maybe applies a deny
        ({"amount": 5}, "auto"),
        ({"amount": 6000, "currency": "GBP"}, "deny"),
        ({"amount": 40, "currency": "GBP"}, "notify"),
        ({"amount": 40, "currency": "gbp"}, "ask"),  # a maybe never applies a notify rule
    ],
)
def test_notify_is_one_verdict_among_the_others(args: dict[str, object], outcome: str) -> None:
    skill = shop(NOTIFY).get("shop")
    assert call_verdict(skill, "shop.refund", args).outcome == outcome


def test_a_notify_rule_takes_no_runs_condition() -> None:
    with pytest.raises(Exception, match="runs finds a command"):
        parse_skill(
            HEAD
            + "tools:\n  sh.run:\n    policy: ask\n    rules:\n"
            + "      - when: {command: {runs: rm -r /}}\n        policy: notify\n",
            "shop.yaml",
        )


PEOPLE = """people:
  alice: {slack: UA}
  bob: {slack: UB}
  carol: {slack: UC}
approvers: {people: [alice]}
tools:
  deploy.prod: ask
  deploy.big: {policy: ask, approvals: {required: 2}}
"""


class Book:
    def __init__(self, *aways: Away) -> None:
        self.aways = list(aways)
        self.reads = 0

    async def set(self, away: Away) -> Away:
        self.aways.append(away)
        return away

    async def back(self, person: str, *, by: str, now: datetime) -> Away | None:
        return None

    async def current(self, now: datetime) -> list[Away]:
        self.reads += 1
        return [a for a in self.aways if a.holds(now)]


def item(tool: str = "deploy.prod") -> Item:
    return Item(
        id="i1",
        run_id="r1",
        skill="shop",
        box=Box.ACTION,
        kind=ItemKind.TOOL,
        status=ItemStatus.PENDING,
        title="t",
        body="",
        created_at=T0,
        tool=tool,
    )


def access(now: datetime, *aways: Away) -> AwayAccess:
    return AwayAccess(skills=shop(PEOPLE), book=Book(*aways), clock=lambda: now)


ALICE_AWAY = Away("alice", "bob", T0 + timedelta(days=1), "owner", T0)


async def test_a_delegate_decides_as_the_away_person_while_they_are_away() -> None:
    bob, carol = Principal.of("slack", "UB"), Principal.of("slack", "UC")
    during = access(T0, ALICE_AWAY)
    assert not Access.may_decide(during, bob, item())  # bob is no approver of his own
    assert not during.may_decide(bob, item())  # until the snapshot is read
    acting = await acting_for(during, bob, item())
    assert acting.actor == "bob for alice"
    assert during.may_decide(bob, item())
    assert not during.may_decide(carol, item())
    assert (await acting_for(during, carol, item())).on_behalf is None

    after = access(T0 + timedelta(days=2), ALICE_AWAY)
    assert (await acting_for(after, bob, item())).on_behalf is None
    assert not after.may_decide(bob, item())


async def test_a_delegate_gains_nothing_the_away_person_lacks() -> None:
    # Carol away with bob as her delegate: carol approves nothing, so bob decides nothing.
    carol_away = Away("carol", "bob", T0 + timedelta(days=1), "owner", T0)
    found = access(T0, carol_away)
    assert (await acting_for(found, Principal.of("slack", "UB"), item())).on_behalf is None
    # An ask token that names bob decides nothing, delegate or not.
    asker = Principal.token(token_id="t", name="bot", scope=Scope.ASK, person="bob")
    assert (await acting_for(access(T0, ALICE_AWAY), asker, item())).on_behalf is None


async def test_the_away_states_are_read_only_where_they_could_matter() -> None:
    # Every decision asks; an approver deciding as themselves needs no away state, and a
    # skill that names one person has nobody to delegate to.
    during = access(T0, ALICE_AWAY)
    alice = Principal.of("slack", "UA")
    assert (await acting_for(during, alice, item())).on_behalf is None
    assert during.book.reads == 0  # type: ignore[attr-defined]
    alone = AwayAccess(
        skills=shop("people:\n  bob: {slack: UB}\napprovers: {people: [bob]}\n"),
        book=Book(Away("bob", "alice", T0 + timedelta(days=1), "owner", T0)),
        clock=lambda: T0,
    )
    stranger = Principal.of("slack", "UA")
    assert (await acting_for(alone, stranger, item())).on_behalf is None
    assert not alone.may_decide(stranger, item())
    assert alone.book.reads == 0  # type: ignore[attr-defined]
    # Where they could matter they are read at every decision, never from an old snapshot.
    bob = Principal.of("slack", "UB")
    assert (await acting_for(during, bob, item())).actor == "bob for alice"
    assert (await acting_for(during, bob, item())).actor == "bob for alice"
    assert during.book.reads == 2  # type: ignore[attr-defined]


def test_a_tool_whose_policy_is_notify() -> None:
    skill = shop("tools:\n  crm.add: notify\n").get("shop")
    verdict = call_verdict(skill, "crm.add", {})
    assert (verdict.outcome, verdict.ruling.why) == ("notify", "the policy of crm.add")
