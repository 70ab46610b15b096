"""Groups, rotas, shift calendars and escalation ladders as a skill file writes them: who
they stand for at a given moment, and the problems a bad file is refused with (file, line,
what is wrong)."""

from __future__ import annotations

import textwrap
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from pizzabot.agent.addresses import DiscordTarget, EmailTarget, TeamsTarget
from pizzabot.agent.escalation import ladder, on_call_turns, person_targets, plan_text
from pizzabot.agent.model import Box, Item, ItemKind, ItemStatus
from pizzabot.agent.policy import Access, Principal
from pizzabot.agent.skills import SkillBook, SkillFileError, load_skills, parse_skill

PEOPLE = """\
people:
  alice: {slack: UA, email: alice@example.test}
  bob: {slack: UB, email: bob@example.test}
  carol: {email: carol@example.test}
"""

SKILL = """\
name: ops
tools:
  deploy.prod:
    policy: ask
    escalate:
      - {after: 30m, remind: true}
      - {after: 1h, to: group:leads}
      - {after: 2h, then: reject}
approvers: [group:sre]
"""

# A Monday in winter (Europe/Amsterdam is UTC+1): the rota hands over at 09:00 local.
MONDAY = datetime(2026, 11, 30, 8, 0, tzinfo=UTC)


def folder(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (tmp_path / name).write_text(textwrap.dedent(text))
    return tmp_path


def groups_file(extra: str = "") -> str:
    return PEOPLE + "groups:\n  sre: [alice, bob]\n  leads: [carol]\n" + extra


def test_a_skill_uses_the_folders_groups_and_people(tmp_path: Path) -> None:
    report = load_skills(folder(tmp_path, {"groups.yaml": groups_file(), "ops.yaml": SKILL}))
    assert report.errors == [] and list(report.skills) == ["ops"]
    ops = report.skills["ops"]
    assert ops.approvers_for("deploy.prod", "slack") == ["UA", "UB"]
    assert ops.approvers_for("deploy.prod", "email") == ["alice@example.test", "bob@example.test"]
    # The leads decide only once the ladder has widened to them.
    asked = MONDAY
    assert "carol@example.test" not in ops.approvers_for(
        "deploy.prod", "email", at=asked + timedelta(minutes=59), asked_at=asked
    )
    assert "carol@example.test" in ops.approvers_for(
        "deploy.prod", "email", at=asked + timedelta(hours=1), asked_at=asked
    )


def test_a_bad_groups_file_is_refused_with_its_line(tmp_path: Path) -> None:
    bad = PEOPLE + "groups:\n  sre: [alice, dave]\n  leads: {membrs: [carol]}\n"
    report = load_skills(folder(tmp_path, {"groups.yaml": bad, "ops.yaml": SKILL}))
    said = sorted(str(e) for e in report.errors)
    groups_error = next(s for s in said if "groups.yaml" in s)
    assert "groups.yaml:7: groups.leads: unknown key `membrs`: did you mean `members`?" in (
        groups_error
    )
    # A skill that needs its groups is refused too, saying which group is missing.
    ops_error = next(s for s in said if "ops.yaml" in s)
    assert "'group:sre' is not a group" in ops_error
    assert report.skills == {}
    bad = PEOPLE + "groups:\n  sre: [alice, dave]\n"
    (tmp_path / "other").mkdir()
    [error] = load_skills(folder(tmp_path / "other", {"groups.yaml": bad})).errors
    assert "groups.yaml:6: groups.sre: 'dave' is not in people" in str(error)


def test_an_unknown_group_is_refused_at_its_line(tmp_path: Path) -> None:
    text = PEOPLE + "groups: {sre: [alice]}\n" + SKILL
    with pytest.raises(SkillFileError) as caught:
        parse_skill(text, "skills/ops.yaml")
    said = str(caught.value)
    assert said.startswith("skills/ops.yaml:12: tools.deploy.prod.escalate.1.to")
    assert "'group:leads' is not a group (groups: sre)" in said


def test_a_person_defined_differently_beside_groups_yaml_is_refused(tmp_path: Path) -> None:
    ops = "people:\n  alice: {slack: UZ}\n" + SKILL
    report = load_skills(folder(tmp_path, {"groups.yaml": groups_file(), "ops.yaml": ops}))
    [error] = report.errors
    assert "ops.yaml:2: people.alice: defined differently in groups.yaml" in str(error)


def test_ladder_steps_must_come_in_order_and_end_last() -> None:
    for steps, said in [
        ("[{after: 2h, then: reject}, {after: 3h, to: group:sre}]", "only the last step"),
        ("[{after: 2h, remind: true}, {after: 1h, remind: true}]", "in the order"),
        ("[{after: 1h, remind: true, then: halt}]", "a step does one thing"),
    ]:
        text = (
            PEOPLE + f"groups: {{sre: [alice]}}\nname: x\ntools: {{t.t: {{escalate: {steps}}}}}\n"
        )
        with pytest.raises(SkillFileError) as caught:
            parse_skill(text, "x.yaml")
        assert said in str(caught.value)


def test_the_old_fields_and_the_ladder_are_one_list() -> None:
    text = PEOPLE + textwrap.dedent("""\
        name: x
        tools:
          a.old:
            remind_after: 2h
            escalate_after: 8h
            escalate_to: {email: [boss@example.test], approvers: [carol]}
            timeout: 1d
            on_timeout: halt
        """)
    skill = parse_skill(PEOPLE + "groups: {sre: [alice], leads: [carol]}\n" + SKILL, "o")
    rungs = ladder(skill.rule("deploy.prod"))
    assert [(r.key, r.after, r.act) for r in rungs] == [
        ("step1", 1800, "remind"),
        ("step2", 3600, "widen"),
        ("step3", 7200, "end"),
    ]
    assert plan_text(skill.rule("deploy.prod")) == (
        "30m: reminder · 1h: sent to group:leads, who may decide · 2h: rejected"
    )
    old = parse_skill(text, "x.yaml").rule("a.old")
    assert [(r.key, r.act, r.halt) for r in ladder(old)] == [
        ("remind", "remind", False),
        ("escalate", "widen", False),
        ("timeout", "end", True),
    ]


ROTA = PEOPLE + textwrap.dedent("""\
    name: x
    groups:
      oncall:
        rota:
          people: [alice, bob]
          handover: {weekday: mon, at: "09:00"}
          timezone: Europe/Amsterdam
          starts: 2026-11-30
    approvers: [group:oncall]
    """)


def test_a_weekly_rota_hands_over_at_its_local_time() -> None:
    skill = parse_skill(ROTA, "x.yaml")
    rota = skill.groups["oncall"]
    assert rota.now(MONDAY - timedelta(seconds=1)) == ["bob"]  # the turn before the first
    assert rota.now(MONDAY) == ["alice"]
    assert rota.now(MONDAY + timedelta(days=7) - timedelta(seconds=1)) == ["alice"]
    assert rota.now(MONDAY + timedelta(days=7)) == ["bob"]
    assert rota.now(MONDAY + timedelta(days=14)) == ["alice"]
    # In summer Amsterdam is UTC+2: the hand-over stays at 09:00 local, 07:00 UTC.
    summer = datetime(2027, 6, 7, 7, 0, tzinfo=UTC)
    turn = rota.on_call(summer)
    assert turn is not None and turn.since == summer
    assert skill.approvers_for("any.tool", "slack", at=MONDAY) == ["UA"]
    assert skill.approvers_for("any.tool", "slack", at=MONDAY + timedelta(days=7)) == ["UB"]


def test_an_unquoted_handover_time_is_refused_with_a_hint() -> None:
    with pytest.raises(SkillFileError) as caught:
        parse_skill(ROTA.replace('"09:00"', "10:30"), "x.yaml")
    assert 'write the hand-over time in quotes, like "09:00"' in str(caught.value)


SHIFTS = """\
BEGIN:VCALENDAR
VERSION:2.0
PRODID:-//test//shifts//EN
BEGIN:VEVENT
UID:day@test
DTSTART:20261130T080000Z
DTEND:20261130T200000Z
RRULE:FREQ=DAILY
SUMMARY:alice
END:VEVENT
BEGIN:VEVENT
UID:night@test
DTSTART:20261130T200000Z
DTEND:20261201T080000Z
RRULE:FREQ=DAILY
ATTENDEE:mailto:Bob@Example.test
SUMMARY:Night shift
END:VEVENT
END:VCALENDAR
"""


def test_shifts_come_from_an_icalendar_file(tmp_path: Path) -> None:
    files = {
        "shifts.ics": SHIFTS,
        "groups.yaml": PEOPLE + "groups:\n  oncall: {shifts: {file: shifts.ics}}\n",
        "x.yaml": "name: x\napprovers: [group:oncall]\n",
    }
    report = load_skills(folder(tmp_path, files))
    assert report.errors == []
    skill = report.skills["x"]
    day = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
    assert skill.groups["oncall"].now(day) == ["alice"]
    assert skill.groups["oncall"].now(day + timedelta(hours=9)) == ["bob"]  # by attendee
    turn = skill.groups["oncall"].on_call(day)
    assert turn is not None and turn.until == datetime(2026, 12, 3, 20, 0, tzinfo=UTC)
    assert skill.approvers_for(None, "email", at=day) == ["alice@example.test"]


def test_a_shift_that_names_nobody_is_refused(tmp_path: Path) -> None:
    files = {
        "shifts.ics": SHIFTS.replace("SUMMARY:alice", "SUMMARY:dave"),
        "groups.yaml": PEOPLE + "groups:\n  oncall:\n    shifts: {file: shifts.ics}\n",
    }
    [error] = load_skills(folder(tmp_path, files)).errors
    said = str(error)
    assert "groups.yaml:7: groups.oncall.shifts" in said and "'dave' names no person" in said


def test_a_shifts_file_outside_the_folder_is_refused(tmp_path: Path) -> None:
    (tmp_path / "shifts.ics").write_text(SHIFTS)
    inner = tmp_path / "skills"
    inner.mkdir()
    files = {"groups.yaml": PEOPLE + "groups:\n  oncall: {shifts: {file: ../shifts.ics}}\n"}
    [error] = load_skills(folder(inner, files)).errors
    assert "must be inside the skills folder" in str(error)


def action(created_at: datetime, tool: str = "deploy.prod", skill: str = "x") -> Item:
    return Item(
        id="i1",
        run_id="r1",
        skill=skill,
        box=Box.ACTION,
        kind=ItemKind.TOOL,
        status=ItemStatus.PENDING,
        title="t",
        body="",
        created_at=created_at,
        tool=tool,
    )


def test_access_follows_the_rota_and_the_ladder() -> None:
    text = ROTA + textwrap.dedent("""\
        tools:
          deploy.prod:
            escalate: [{after: 1h, to: carol}, {after: 2h, then: reject}]
        """)
    skill = parse_skill(text, "x.yaml")
    now = [MONDAY - timedelta(minutes=30)]
    access = Access(skills=SkillBook({"x": skill}), clock=lambda: now[0])
    card = action(now[0])
    bob, alice = Principal.of("slack", "UB"), Principal.of("slack", "UA")
    carol = Principal.of("email", "carol@example.test")
    assert access.may_decide(bob, card) and not access.may_decide(alice, card)
    now[0] = MONDAY  # the hand-over: alice is on call, bob no longer
    assert access.may_decide(alice, card) and not access.may_decide(bob, card)
    assert not access.may_decide(carol, card)
    now[0] = card.created_at + timedelta(hours=1)
    assert access.may_decide(carol, card)
    turns = on_call_turns(skill, "deploy.prod", at=now[0], asked_at=card.created_at)
    assert [(t.group, t.person) for t in turns] == [("oncall", "alice")]
    assert len(turns[0].key) <= 16


def test_two_of_a_group_name_only_that_group(tmp_path: Path) -> None:
    text = PEOPLE + textwrap.dedent("""\
        name: pay
        groups: {finance: [bob, carol]}
        approvers: [alice]
        self_approval: false
        tools:
          bank.transfer: {approvals: {required: 2, of: group:finance}}
        """)
    skill = parse_skill(text, "pay.yaml")
    assert skill.approver_names("bank.transfer") == ["bob", "carol"]
    assert skill.approvals_required("bank.transfer") == 2
    assert skill.approver_names("other.tool") == ["alice"]
    access = Access(skills=SkillBook({"pay": skill}))
    card = action(datetime.now(UTC), tool="bank.transfer", skill="pay")
    assert not access.may_decide(Principal.of("slack", "UA"), card)
    assert access.may_decide(Principal.of("slack", "UB"), card)


def test_a_person_on_teams_or_discord_is_reached_in_their_own_chat() -> None:
    text = textwrap.dedent("""\
        name: x
        people:
          dana: {teams: 0d0d0d0d-1111-4222-8333-444444444444}
          erin: {discord: 1700000000000000001, email: erin@example.test}
        approvers: [dana]
        """)
    skill = parse_skill(text, "x.yaml")
    every = frozenset({"teams", "discord", "email"})
    assert person_targets(skill, ["dana", "erin"], every) == [
        TeamsTarget("user:0d0d0d0d-1111-4222-8333-444444444444"),
        EmailTarget("erin@example.test"),
        DiscordTarget("user:1700000000000000001"),
    ]
    assert person_targets(skill, ["dana", "erin"], frozenset({"email"})) == [
        EmailTarget("erin@example.test")
    ]
    assert TeamsTarget("19:ops@thread.tacv2").person is None
    assert DiscordTarget("user:1700000000000000001").person == "1700000000000000001"
