"""The fatigue figures' own rules (`pizzabot.agent.stats`, `pizzabot.agent.stats_rules`):
nearest-rank percentiles, the period a `since` names, and the snippet a repeat suggests."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import yaml

from pizzabot.agent.model import Box, Item, ItemKind, ItemStatus
from pizzabot.agent.policy.rules import judge
from pizzabot.agent.skills import Skill
from pizzabot.agent.stats import compute, nearest_rank, period_start

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def test_percentiles_are_nearest_rank() -> None:
    assert nearest_rank([], 50) is None
    assert nearest_rank([7.0], 90) == 7.0
    assert nearest_rank([4.0, 1.0, 3.0, 2.0], 50) == 2.0  # two of four are no greater
    assert nearest_rank([float(n) for n in range(1, 11)], 90) == 9.0
    assert nearest_rank([float(n) for n in range(1, 12)], 90) == 10.0


def test_a_period_is_a_duration_back_or_a_date() -> None:
    assert period_start("30d", now=NOW) == NOW - timedelta(days=30)
    assert period_start(" 2w ", now=NOW) == NOW - timedelta(weeks=2)
    assert period_start("2026-11-01", now=NOW) == datetime(2026, 11, 1, tzinfo=UTC)
    assert period_start("2026-11-01T02:00+02:00", now=NOW) == datetime(2026, 11, 1, tzinfo=UTC)
    early = period_start("0001-01-01T00:00+14:00", now=NOW)  # before the calendar, in UTC
    assert early == datetime.min.replace(tzinfo=UTC)
    for bad in ("last tuesday", "30x", "999999w", ""):
        with pytest.raises(ValueError):
            period_start(bad, now=NOW)


def card(n: int, args: dict[str, Any], status: ItemStatus = ItemStatus.APPROVED) -> Item:
    made = NOW - timedelta(hours=n)
    return Item(
        id=f"i{n}", run_id=f"r{n}", skill="shop", box=Box.ACTION, kind=ItemKind.TOOL,
        status=status, title="t", body="b", created_at=made, tool="crm.refund", args=args,
        decided_by="ann", decided_via="web", decided_at=made + timedelta(seconds=n),
    )  # fmt: skip


def test_a_repeat_with_nested_arguments_suggests_a_rule_by_dotted_path() -> None:
    same = {"amount": 5, "customer": {"country": "NL", "tags": ["a"]}}
    items = [card(n, same) for n in (1, 2, 3)] + [card(4, {"amount": 9000}, ItemStatus.REJECTED)]
    (repeat,) = compute(items, since=NOW - timedelta(days=1), until=NOW).repeats
    assert (repeat.kind, repeat.approved, repeat.args) == ("rule", 3, same)
    entry = yaml.safe_load(repeat.snippet)["tools"]["crm.refund"]
    assert entry["rules"][0]["when"] == {
        "amount": {"eq": 5},
        "customer.country": {"eq": "NL"},
        "customer.tags": {"eq": ["a"]},
    }
    shop = Skill.model_validate(
        {"name": "shop", "instructions": "x", "model": "openai/none",
         "tools": {"crm.refund": {"policy": "ask", **entry}}}
    )  # fmt: skip
    assert judge(shop, "crm.refund", same).policy == "auto"
    assert judge(shop, "crm.refund", {**same, "amount": 6}).policy == "ask"


def test_arguments_a_rule_cannot_name_get_a_grant_instead() -> None:
    odd = {"a.b": 1}
    items = [card(n, odd) for n in (1, 2, 3)] + [card(4, {"x": 1}, ItemStatus.EDITED)]
    (repeat,) = compute(items, since=NOW - timedelta(days=1), until=NOW).repeats
    assert repeat.kind == "grant"
    assert yaml.safe_load(repeat.snippet) == {"tools": {"crm.refund": {"grants": ["exact"]}}}


def test_fewer_than_the_least_is_no_repeat_and_an_expiry_is_no_persons_decision() -> None:
    items = [card(1, {}), card(2, {})]
    expired = card(3, {}, ItemStatus.EXPIRED)
    expired = Item(**{**expired.__dict__, "decided_by": "timeout", "decided_via": "timer"})
    stats = compute([*items, expired], since=NOW - timedelta(days=1), until=NOW)
    assert stats.repeats == [] and stats.cards == 3
    assert (stats.outcomes.expired, stats.outcomes.approve_rate) == (1, 1.0)
    assert [p.person for p in stats.people] == ["ann"]
