"""Who is who for a count of people, and whether the person who asked may approve: a skill
that needs two people it cannot tell apart is refused at its line; `self_approval` is read
from the tool's entry, else the skill."""

from __future__ import annotations

import pytest

from pizzabot.agent.errors import SkillError
from pizzabot.agent.skills import parse_skill

HEAD = "name: pay\ninstructions: pay\nmodel: openai/none\n"
TWO = "tools:\n  bank.transfer:\n    policy: ask\n    approvals: {required: 2}\n"


@pytest.mark.parametrize(
    ("approvers", "pair"),
    [
        ("approvers: {slack: [U1], email: [a@x.example]}\n", "slack U1 and email a@x.example"),
        (
            "people:\n  ann: {email: ann@x.example}\napprovers: {slack: [U1], people: [ann]}\n",
            "slack U1 and ann",
        ),
        (
            "people:\n  ann: {slack: U2}\napprovers: {email: [b@x.example], people: [ann]}\n",
            "email b@x.example and ann",
        ),
    ],
)
def test_approvers_that_may_be_one_person_refuse_a_two_person_tool(
    approvers: str, pair: str
) -> None:
    with pytest.raises(SkillError) as refused:
        parse_skill(HEAD + approvers + TWO, "pay.yaml")
    error = refused.value
    assert error.path == "pay.yaml"
    assert (
        error.line
        == (HEAD + approvers + TWO).splitlines().index("    approvals: {required: 2}") + 1
    )
    assert f"but {pair} may be one person" in str(error)


@pytest.mark.parametrize(
    "approvers",
    [
        "approvers: {slack: [U1, U2]}\n",  # one channel: each account is a person
        "approvers: {email: [a@x.example, b@x.example]}\n",
        "people:\n  ann: {slack: U1, email: a@x.example}\n"
        "approvers: {slack: [U1], email: [a@x.example]}\n",  # joined: one person
        "people:\n  ann: {slack: U1, email: a@x.example}\n  bob: {email: b@x.example}\n"
        "approvers: [ann, bob]\n",
        "people:\n  ann: {slack: U1, email: a@x.example}\napprovers: {slack: [U2], people: [ann]}\n",
        "",  # the owner's channels only
    ],
)
def test_approvers_told_apart_load(approvers: str) -> None:
    assert parse_skill(HEAD + approvers + TWO, "pay.yaml").approvals_required("bank.transfer") == 2


def test_one_approval_needs_nobody_told_apart() -> None:
    text = HEAD + "approvers: {slack: [U1], email: [a@x.example]}\ntools:\n  bank.transfer: ask\n"
    assert parse_skill(text, "pay.yaml").approvals_required("bank.transfer") == 1


def test_an_escalation_that_may_add_the_same_person_again_is_refused() -> None:
    text = (
        HEAD
        + "approvers: {slack: [U1]}\n"
        + "tools:\n  bank.transfer:\n    policy: ask\n    approvals: {required: 2}\n"
        + "    escalate_after: 1h\n    escalate_to: {approvers: {email: [a@x.example]}}\n"
    )
    with pytest.raises(SkillError) as refused:
        parse_skill(text, "pay.yaml")
    assert "slack U1 and email a@x.example may be one person" in str(refused.value)


def test_self_approval_is_the_tools_else_the_skills() -> None:
    text = (
        HEAD
        + "self_approval: false\n"
        + "tools:\n  bank.transfer: {policy: ask, self_approval: true}\n  bank.*: ask\n"
    )
    skill = parse_skill(text, "pay.yaml")
    assert skill.self_approval_for("bank.transfer") is True
    assert skill.self_approval_for("bank.refund") is False  # the pattern's entry says nothing
    assert skill.self_approval_for("crm.send") is False  # unlisted
    assert skill.self_approval_for(None) is False  # a budget item

    default = parse_skill(HEAD + "tools:\n  bank.transfer: {self_approval: false}\n", "pay.yaml")
    assert default.self_approval_for("bank.transfer") is False
    assert default.self_approval_for("bank.refund") is True


@pytest.mark.parametrize(
    ("line", "said"),
    [
        ("self_approval: maybe\n", "self_approval: Input should be a valid boolean"),
        ("self_aproval: false\n", "unknown key `self_aproval`: did you mean `self_approval`?"),
        ("tools:\n  a.b: {self_approval: 7}\n", "tools.a.b.self_approval: Input should be"),
    ],
)
def test_a_wrong_self_approval_refuses_the_skill(line: str, said: str) -> None:
    with pytest.raises(SkillError, match=said):
        parse_skill(HEAD + line, "pay.yaml")
