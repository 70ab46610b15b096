"""What a user reads when a skill file is refused: every problem with its line, an unknown key
named with the key it most likely meant, and the skill's name so "run x" can say x's file was
refused. Through the real loader, from files on disk."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from pizzabot.agent.errors import NotFound
from pizzabot.agent.skills import SkillBook, SkillFileError, load_skills, parse_skill

GOOD = "name: triage\ninstructions: sort the mail\nmodel: openai/gpt-4o\n"


def refusal(tmp_path: Path, text: str) -> SkillFileError:
    (tmp_path / "triage.yaml").write_text(text)
    report = load_skills(tmp_path)
    assert report.skills == {}
    [error] = report.errors
    return error


def test_a_misspelt_key_is_named_with_the_key_it_meant(tmp_path: Path) -> None:
    error = refusal(tmp_path, GOOD.replace("model:", "modle:"))
    assert str(error) == (
        f"{tmp_path / 'triage.yaml'}:3: unknown key `modle`: did you mean `model`? "
        "(`model` is required)"
    )
    assert "Field required" not in str(error)  # the misspelling explains the missing key


@pytest.mark.parametrize(
    ("tail", "says"),
    [
        ("budget: {tokns: 100}\n", "budget: unknown key `tokns`: did you mean `tokens`?"),
        (
            "mcp_servers:\n  cal: {url: 'http://127.0.0.1:1/mcp', header: {}}\n",
            "mcp_servers.cal: unknown key `header`: did you mean `headers`?",
        ),
        (
            "mcp_servers:\n  cal: {comand: uvx}\n",
            "mcp_servers.cal: unknown key `comand`: did you mean `command`? (`command` is required)",
        ),
        (
            "tools:\n  crm.send: {policy: ask, timout: 1h}\n",
            "tools.crm.send: unknown key `timout`: did you mean `timeout`?",
        ),
        ("folders:\n  - {path: /srv, writable: true}\n", "did you mean `write`?"),
        (
            "approvers: {slak: [U1]}\n",
            "approvers: unknown key `slak`: did you mean `slack`?",
        ),
        ("colour: blue\n", "unknown key `colour`"),
        (
            "deliver: {fax: '555'}\n",
            "deliver: unknown key `fax`; the keys here are discord, email, slack, teams, telegram",
        ),
    ],
)
def test_unknown_keys_say_what_was_meant(tmp_path: Path, tail: str, says: str) -> None:
    error = refusal(tmp_path, GOOD + tail)
    last = (GOOD + tail).count("\n")  # the line of the bad key
    assert error.line == last and says in error.message and "Extra inputs" not in str(error)


def test_every_problem_is_shown_with_its_line(tmp_path: Path) -> None:
    text = (
        "name: triage\n"  # 1
        "instructions: sort the mail\n"  # 2
        "modle: openai/gpt-4o\n"  # 3
        "tools:\n"  # 4
        "  crm.send: sometimes\n"  # 5
        "budget:\n"  # 6
        "  tokens: -1\n"  # 7
        "  stepz: 3\n"  # 8
    )
    error = refusal(tmp_path, text)
    assert [(p.line, p.message) for p in error.problems] == [
        (3, "unknown key `modle`: did you mean `model`? (`model` is required)"),
        (5, "tools.crm.send: Input should be 'auto', 'notify', 'ask' or 'deny'"),
        (7, "budget.tokens: Input should be greater than or equal to 1"),
        (8, "budget: unknown key `stepz`: did you mean `steps`?"),
    ]
    said = str(error)
    assert said.startswith(f"{tmp_path / 'triage.yaml'}: 4 problems: line 3: unknown key `modle`")
    assert "more)" not in said and "line 8: budget: unknown key `stepz`" in said
    assert error.name == "triage"


def test_the_name_is_read_even_from_a_file_that_is_not_valid_yaml(tmp_path: Path) -> None:
    error = refusal(tmp_path, "name: triage\nmodel: [oops\n")
    assert error.name == "triage" and "not valid YAML" in error.message


def test_running_a_refused_skill_says_it_was_refused_where_and_why(tmp_path: Path) -> None:
    (tmp_path / "triage.yaml").write_text(GOOD.replace("model:", "modle:"))
    (tmp_path / "other.yaml").write_text(GOOD.replace("triage", "other"))
    book = SkillBook.of(load_skills(tmp_path))
    with pytest.raises(NotFound) as caught:
        book.get("triage")
    assert str(caught.value) == (
        f"skill 'triage' was refused: {tmp_path / 'triage.yaml'}:3: unknown key `modle`: "
        "did you mean `model`? (`model` is required)"
    )
    with pytest.raises(NotFound, match="no skill named 'nosuch'; known: other"):
        book.get("nosuch")


def test_a_refused_file_keeps_the_last_good_version_and_runs_keep_theirs(tmp_path: Path) -> None:
    path = tmp_path / "triage.yaml"
    path.write_text(GOOD)
    book = SkillBook.of(load_skills(tmp_path))
    first = book.get("triage")
    started = datetime(2026, 12, 1, 9, tzinfo=UTC)

    path.write_text(GOOD.replace("sort the mail", "sort the mail, oldest first"))
    change = book.update(load_skills(tmp_path), now=started + timedelta(minutes=5))
    assert change.changed == ["triage"] and str(change) == "changed triage"
    second = book.get("triage")
    assert second.instructions == "sort the mail, oldest first"
    # A run created before the change goes on with the version it started with.
    assert book.for_run("triage", started) == first
    assert book.for_run("triage", started + timedelta(minutes=6)) == second

    path.write_text(GOOD.replace("model:", "modle:"))
    change = book.update(load_skills(tmp_path), now=started + timedelta(minutes=9))
    assert change.kept == ["triage"] and change.changed == [] and book.get("triage") == second
    assert str(change).endswith("(skill triage keeps its last good version)")
    [refused] = book.refused()
    assert refused.kept == "triage" and refused.error.line == 3

    path.unlink()
    change = book.update(load_skills(tmp_path), now=started + timedelta(minutes=12))
    assert change.removed == ["triage"] and "triage" not in book
    assert book.for_run("triage", started) == first  # a run in flight still finishes


def test_a_valid_file_still_parses() -> None:
    assert parse_skill(GOOD, "x.yaml").name == "triage"
