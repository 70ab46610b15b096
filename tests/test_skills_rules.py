"""A skill's rules on argument values are read strictly: a bad rule refuses the file with the
line and what is wrong, and the other skills still load."""

from __future__ import annotations

from pathlib import Path

import pytest

from pizzabot.agent.skills import SkillBook, load_skills

HEAD = "name: shop\ninstructions: hi\nmodel: openai/gpt-4o\n"


def rules(*conditions: str) -> str:
    """A skill whose `crm.refund` has one rule with these `when` lines (from line 10 on)."""
    lines = "".join(f"          {c}\n" for c in conditions)
    return HEAD + (
        "tools:\n"
        "  crm.refund:\n"
        "    policy: ask\n"
        "    rules:\n"
        "      - policy: auto\n"
        "        when:\n" + lines
    )


@pytest.mark.parametrize(
    ("text", "line", "says"),
    [
        (
            rules("amount: {lte: 100}", "currency: {among: [EUR]}"),
            11,
            "when.currency: Value error, unknown operator `among`",
        ),
        (
            rules("amount: {lesser: 100}"),
            10,
            "unknown operator `lesser`",
        ),
        (
            rules("customer: {country: NL}"),
            10,
            "a nested argument is named by its dotted path, like customer.country",
        ),
        (
            rules("reference: {matches: 'INV-[0-9'}"),
            10,
            "matches: 'INV-[0-9' is not a regular expression",
        ),
        (rules("amount: {lte: '100'}"), 10, "lte compares numbers, and '100' is not one"),
        (rules("amount: {gt: true}"), 10, "gt compares numbers, and True is not one"),
        (rules("amount: {gte: .inf}"), 10, "gte compares numbers"),
        (rules("currency: {in: EUR}"), 10, "in takes a list of values, like [EUR, USD]"),
        (rules("note: {present: maybe}"), 10, "when.note.present: Input should be a valid boolean"),
        (rules("due: 2026-01-31"), 10, "eq: 2026-01-31 is a date in YAML"),
        (rules("amount: {}"), 10, "no operator: use one of eq, ne, lt"),
        (rules("customer..country: NL"), 9, "is not an argument's name or dotted path"),
        (
            HEAD + "tools:\n  crm.refund:\n    rules:\n      - when: {amount: 5}\n",
            7,
            "rules.0.policy: Field required",
        ),
        (
            HEAD + "tools:\n  crm.refund:\n    rules:\n      - {when: {}, policy: auto}\n",
            7,
            "`when` needs a condition",
        ),
        (HEAD + "defaults: {read_only: always}\n", 4, "defaults.read_only: Input should be"),
    ],
)
def test_a_bad_rule_refuses_the_skill_with_its_line(
    tmp_path: Path, text: str, line: int, says: str
) -> None:
    (tmp_path / "shop.yaml").write_text(text)
    (tmp_path / "other.yaml").write_text(HEAD.replace("name: shop", "name: other"))
    report = load_skills(tmp_path)
    assert list(report.skills) == ["other"]
    (error,) = report.errors
    assert error.path == str(tmp_path / "shop.yaml") and error.line == line, str(error)
    assert says in str(error)
    # Asking for the skill says it was refused, where and why.
    book = SkillBook.of(report)
    with pytest.raises(Exception, match=f"skill 'shop' was refused: .*shop.yaml:{line}: "):
        book.get("shop")


def test_every_operator_reads_as_written(tmp_path: Path) -> None:
    (tmp_path / "shop.yaml").write_text(
        rules(
            "amount: {gt: 0, lte: 100.5}",
            "currency: {in: [EUR, USD]}",
            "country: {not_in: [XX]}",
            "customer.tier: gold",
            "reference: {matches: 'INV-[0-9]{4}', ne: INV-0000}",
            "note: {present: false}",
            "copies: {lt: 3, gte: 1}",
            "urgent: {eq: true}",
            "code: {eq: null}",
        )
    )
    report = load_skills(tmp_path)
    assert report.errors == []
    (rule,) = report.skills["shop"].rule("crm.refund").rules
    assert {path: check.operators() for path, check in rule.when.items()} == {
        "amount": {"gt": 0, "lte": 100.5},
        "currency": {"in": ["EUR", "USD"]},
        "country": {"not_in": ["XX"]},
        "customer.tier": {"eq": "gold"},
        "reference": {"matches": "INV-[0-9]{4}", "ne": "INV-0000"},
        "note": {"present": False},
        "copies": {"lt": 3, "gte": 1},
        "urgent": {"eq": True},
        "code": {"eq": None},
    }
    assert report.skills["shop"].origin is not None
    assert report.skills["shop"].origin.lines["crm.refund", 1, "customer.tier"] == 13
