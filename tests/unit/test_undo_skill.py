"""A `notify` tool's `undo:` in a skill file: what loads, what is refused (with the file and
the line), and how the compensating call's templates are filled from the call that ran."""

from __future__ import annotations

import pytest

from pizzabot.agent.errors import SkillError
from pizzabot.agent.skills import Skill, parse_skill
from pizzabot.agent.skills.undo import UndoCall, fill

HEAD = "name: x\ninstructions: hi\nmodel: openai/gpt-4o\nmcp_servers:\n  crm: {command: crm}\n"


def skill(entry: str) -> Skill:
    return parse_skill(HEAD + f"tools:\n  crm.add_contact: {entry}\n", "skills/x.yaml")


def undo_of(s: Skill) -> UndoCall:
    listed = s.entry("crm.add_contact")
    assert listed is not None
    undo = listed[1].undo
    assert undo is not None
    return undo


def test_the_short_form_undoes_with_the_same_arguments() -> None:
    undo = undo_of(skill("{policy: notify, undo: crm.delete_contact}"))
    assert (undo.tool, undo.args) == ("crm.delete_contact", None)
    assert fill(undo, {"email": "a@b.c"}, "ok") == {"email": "a@b.c"}


def test_templates_fill_from_the_arguments_and_the_answer() -> None:
    entry = (
        "{policy: notify, undo: {tool: crm.delete_contact, args: "
        "{id: '{result.contact.id}', email: '{args.email}', note: 'undo of {args.email}'}}}"
    )
    undo = undo_of(skill(entry))
    answer = '{"contact": {"id": 42}}'
    assert fill(undo, {"email": "a@b.c"}, answer) == {
        "id": 42,  # a template alone keeps the type of what it names
        "email": "a@b.c",
        "note": "undo of a@b.c",
    }
    with pytest.raises(ValueError, match="the tool's answer is not JSON"):
        fill(undo, {"email": "a@b.c"}, "added")
    with pytest.raises(ValueError, match="the tool's answer has no 'contact'"):
        fill(undo, {"email": "a@b.c"}, '{"id": 1}')


def test_a_rule_that_notifies_may_offer_undo() -> None:
    entry = (
        "{policy: ask, rules: [{when: {email: {matches: '.*@example.com'}}, policy: notify}], "
        "undo: crm.delete_contact}"
    )
    assert undo_of(skill(entry)).tool == "crm.delete_contact"


@pytest.mark.parametrize(
    ("entry", "says"),
    [
        ("{policy: notify, undo: bank.delete}", "undo: bank.delete is on no server of this skill"),
        ("{policy: ask, undo: crm.delete_contact}", "only a notify tool's FYI offers Undo"),
        ("{policy: notify, undo: delete_contact}", "undo.tool: String should match"),
        (
            "{policy: notify, undo: {tool: crm.delete_contact, args: {id: '{res.id}'}}}",
            "{res.id} is not a template",
        ),
        ("{policy: notify, undo: {tool: crm.d, argz: {}}}", "unknown key `argz`"),
    ],
)
def test_a_bad_undo_is_refused_with_its_file_and_line(entry: str, says: str) -> None:
    with pytest.raises(SkillError, match=says) as caught:
        skill(entry)
    assert caught.value.path == "skills/x.yaml"
    assert caught.value.line == 7
