"""Skill files: strict loading with the file, the line and what is wrong; policy lookup."""

from __future__ import annotations

from pathlib import Path

import pytest

from pizzabot.agent.errors import SkillError
from pizzabot.agent.skills import Budget, load_skills, parse_duration, parse_skill

HEAD = "name: x\ninstructions: hi\nmodel: openai/gpt-4o\n"


@pytest.mark.parametrize(
    ("tail", "line", "says"),
    [
        (
            "tools:\n  a.b: {policy: maybe}\n",
            5,
            "tools.a.b.policy: Input should be 'auto', 'notify', 'ask' or 'deny'",
        ),
        (
            "tools:\n  a.b: sometimes\n",
            5,
            "tools.a.b: Input should be 'auto', 'notify', 'ask' or 'deny'",
        ),
        ("tools:\n  a.b: {policy: ask, timeout: soon}\n", 5, "'soon' is not a duration"),
        (
            "tools:\n  a.b: {policy: ask, escalate_after: 2h}\n",
            5,
            "escalate_after needs escalate_to",
        ),
        (
            "mcp_servers:\n  cal: {comand: uvx}\n",
            5,
            "mcp_servers.cal: unknown key `comand`: did you mean `command`? (`command` is required)",
        ),
        (
            "mcp_servers:\n  cal: {command: uvx, inherit_env: maybe}\n",
            5,
            "mcp_servers.cal.inherit_env: Input should be a valid boolean",
        ),
        (
            "mcp_servers:\n  cal: {command: uvx, pass_env: [GITHUB TOKEN]}\n",
            5,
            "'GITHUB TOKEN' is not an environment variable name",
        ),
        ("budget: {tokens: -1}\n", 4, "budget.tokens"),
        ("colour: blue\n", 4, "unknown key `colour`"),
        ("tools: [\n", 5, "not valid YAML"),
    ],
)
def test_a_bad_skill_says_where_and_what(tail: str, line: int, says: str) -> None:
    with pytest.raises(SkillError) as caught:
        parse_skill(HEAD + tail, "skills/x.yaml")
    assert caught.value.path == "skills/x.yaml" and caught.value.line == line
    assert says in str(caught.value) and str(caught.value).startswith(f"skills/x.yaml:{line}: ")


def test_missing_basics_and_a_bad_name_are_refused() -> None:
    # Without a model a skill is inbox-only, and instructions then say a model was forgotten.
    with pytest.raises(SkillError, match="instructions: a skill without a model is inbox-only"):
        parse_skill("name: x\ninstructions: hi\n", "x.yaml")
    with pytest.raises(SkillError, match="name: String should match"):
        parse_skill("name: Bad Name\ninstructions: hi\nmodel: m\n", "x.yaml")
    with pytest.raises(SkillError, match="a skill is a YAML mapping"):
        parse_skill("- just\n- a list\n", "x.yaml")


def test_policy_lookup_exact_then_longest_pattern_then_ask() -> None:
    skill = parse_skill(
        HEAD + 'tools:\n  crm.send: auto\n  "crm.*": deny\n  "crm.read_*": auto\n', "x.yaml"
    )
    assert skill.rule("crm.send").policy == "auto"
    assert skill.rule("crm.read_notes").policy == "auto"
    assert skill.rule("crm.delete").policy == "deny"
    assert skill.rule("cal.list").policy == "ask"  # unlisted tools ask


def test_a_copy_with_other_tools_reads_its_own_rules_and_many_names_stay_right() -> None:
    skill = parse_skill(HEAD + 'tools:\n  crm.send: auto\n  "crm.*": deny\n', "x.yaml")
    assert skill.rule("crm.send").policy == "auto"  # looked up, and kept
    # What a skill has looked up is not part of it: the same file read again is the same skill.
    assert skill == parse_skill(HEAD + 'tools:\n  crm.send: auto\n  "crm.*": deny\n', "x.yaml")
    copy = skill.model_copy(update={"tools": {"crm.send": "deny", "cal.*": "auto"}})

    assert copy.rule("crm.send").policy == "deny"
    assert copy.rule("cal.list").policy == "auto"
    assert skill.rule("crm.send").policy == "auto"
    assert skill.rule("cal.list").policy == "ask"
    # Tool names can come from a model: past what is kept, every lookup is still right.
    assert {skill.rule(f"crm.t{i}").policy for i in range(600)} == {"deny"}
    assert skill.rule("crm.send").policy == "auto" and skill.rule("x.y").policy == "ask"


def test_durations_and_budget_defaults() -> None:
    assert [parse_duration(v) for v in ("90", "30s", "15m", "2h", "1d", 5)] == [
        90,
        30,
        900,
        7200,
        86400,
        5,
    ]
    own = Budget(tokens=10, per_day={"cost_usd": 1.0})  # type: ignore[arg-type]
    merged = own.over(Budget(tokens=99, steps=7, per_day={"tokens": 5}))  # type: ignore[arg-type]
    assert (merged.tokens, merged.steps, merged.per_day.tokens, merged.per_day.cost_usd) == (
        10,
        7,
        5,
        1.0,
    )


def test_one_bad_file_does_not_stop_the_others(tmp_path: Path) -> None:
    (tmp_path / "good.yaml").write_text(HEAD)
    (tmp_path / "bad.yaml").write_text(HEAD.replace("model: openai/gpt-4o", "model: ["))
    (tmp_path / "twin.yml").write_text(HEAD)
    report = load_skills(tmp_path)
    assert list(report.skills) == ["x"]
    problems = {Path(e.path).name: e.message for e in report.errors}
    assert "not valid YAML" in problems["bad.yaml"] and "already used" in problems["twin.yml"]


def test_the_example_skills_load() -> None:
    report = load_skills(Path(__file__).resolve().parents[2] / "manifests" / "skills")
    assert report.errors == [] and "demo" in report.skills


def test_the_examples_in_manifests_parse() -> None:
    report = load_skills(Path(__file__).resolve().parents[2] / "manifests" / "examples")
    assert report.errors == [] and set(report.skills) == {
        "meeting-prep",
        "new-lead",
        "web-research",
        "file-tidy",
        "crm-log",
        "slack-summary",
    }
