"""People on Teams, Discord and Telegram: their identities in a skill file, the approver
lists per channel (failing closed), how each channel's ids compare, and the targets and refs
the outbox keeps for each."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from pizzabot.agent.addresses import (
    DiscordRef,
    DiscordTarget,
    TeamsRef,
    TeamsTarget,
    TelegramRef,
    TelegramTarget,
    ref_from_json,
    ref_to_json,
    target_of,
)
from pizzabot.agent.policy import DISCORD, TEAMS, TELEGRAM, Access, Principal, same_identity
from pizzabot.agent.policy.quorum import person_of
from pizzabot.agent.skills import Skill, SkillBook
from pizzabot.agent.targets import targets_for
from tests.test_policy_access import item

ALICE_TEAMS = "6f1c8e2a-1b2c-4d5e-8f90-0123456789ab"
SKILL_YAML = f"""
name: sales
instructions: Help.
model: openai/none
people:
  alice: {{teams: {ALICE_TEAMS}, discord: 112233445566778899, telegram: 424242}}
approvers:
  people: [alice]
  discord: [998877665544332211]
  telegram: ["777"]
deliver:
  teams: "19:abc@thread.tacv2"
  discord: 123456789012345678
  telegram: -1001234567890
"""


def sales() -> Skill:
    data: dict[str, Any] = yaml.safe_load(SKILL_YAML)
    return Skill.model_validate(data)


def test_ids_written_as_numbers_are_read_as_their_digits() -> None:
    skill = sales()
    alice = skill.people["alice"]
    assert alice.discord == "112233445566778899" and alice.telegram == "424242"
    assert skill.approvers.discord == ["998877665544332211"]
    assert skill.deliver.discord == "123456789012345678"
    assert skill.deliver.telegram == "-1001234567890"
    assert skill.approvers_for(None, "discord") == ["998877665544332211", "112233445566778899"]
    assert skill.approvers_for(None, "teams") == [ALICE_TEAMS]


def test_a_person_with_only_a_chat_identity_is_a_person() -> None:
    skill = Skill.model_validate(
        {
            "name": "s",
            "instructions": "x",
            "model": "openai/none",
            "people": {"bob": {"telegram": 5}},
            "approvers": ["bob"],
        }
    )
    assert skill.approvers_for(None, "telegram") == ["5"]
    with pytest.raises(ValueError, match="has no identity: give one or more of slack, email"):
        Skill.model_validate(
            {"name": "s", "instructions": "x", "model": "openai/none", "people": {"bob": {}}}
        )


def test_each_chat_channels_ids_compare_exactly() -> None:
    assert same_identity(DISCORD, "123", "123")
    assert not same_identity(DISCORD, "123", " 123")
    assert not same_identity(DISCORD, "１２３", "１２３")  # fullwidth digits are not an id
    assert not same_identity(TELEGRAM, "-5", "-5")  # a user id is positive; a chat's is not
    assert same_identity(TEAMS, ALICE_TEAMS, ALICE_TEAMS)
    assert not same_identity(TEAMS, ALICE_TEAMS.upper(), ALICE_TEAMS)
    assert not same_identity(TEAMS, "a b", "a b")


def test_approvers_per_chat_channel_decide_and_start_and_lists_fail_closed() -> None:
    access = Access(skills=SkillBook({"sales": sales()}))
    action = item(skill="sales")
    for channel, identity in (
        (TEAMS, ALICE_TEAMS),
        (DISCORD, "112233445566778899"),
        (DISCORD, "998877665544332211"),
        (TELEGRAM, "424242"),
        (TELEGRAM, "777"),
    ):
        who = Principal.of(channel, identity)
        assert access.may_decide(who, action), (channel, identity)
        assert access.may_start(who), (channel, identity)
        assert access.may_follow_up(who, "sales"), (channel, identity)
    # An approver on one channel is nobody on another, and a stranger is nobody anywhere.
    for channel, identity in (
        (TELEGRAM, "112233445566778899"),
        (DISCORD, "424242"),
        (TEAMS, "424242"),
        (TELEGRAM, "1"),
    ):
        who = Principal.of(channel, identity)
        assert not access.may_decide(who, action), (channel, identity)
        assert not access.may_start(who), (channel, identity)
    bare: dict[str, Any] = {k: v for k, v in yaml.safe_load(SKILL_YAML).items() if k != "approvers"}
    nobody = Access(skills=SkillBook({"sales": Skill.model_validate(bare)}))
    for channel, identity in ((TEAMS, ALICE_TEAMS), (TELEGRAM, "424242")):
        assert not nobody.may_start(Principal.of(channel, identity))
        assert not nobody.may_decide(Principal.of(channel, identity), action)


def test_one_person_on_three_chat_channels_counts_once() -> None:
    skill = sales()
    names = {
        person_of(skill, Principal.of(TEAMS, ALICE_TEAMS)),
        person_of(skill, Principal.of(DISCORD, "112233445566778899")),
        person_of(skill, Principal.of(TELEGRAM, "424242")),
    }
    assert names == {"alice"}


def test_a_skill_delivers_on_the_chat_channels_that_are_on() -> None:
    skill = sales()
    assert targets_for(skill, frozenset({"discord", "telegram"})) == [
        DiscordTarget("123456789012345678"),
        TelegramTarget("-1001234567890"),
    ]
    assert targets_for(skill, frozenset({"teams"})) == [TeamsTarget("19:abc@thread.tacv2")]
    assert target_of("telegram", "5") == TelegramTarget("5")


def test_chat_refs_keep_their_thread_and_are_found_by_what_a_reply_names() -> None:
    refs = [
        TeamsRef("https://smba.example/teams/", "19:abc@thread.tacv2", "1702", "1701"),
        DiscordRef("123", "456", "450"),
        TelegramRef("-100", "7", "5"),
    ]
    for ref in refs:
        stored = ref_to_json(ref)
        assert ref_from_json(stored, channel=ref.kind) == ref
        assert stored["id"] == ref.external_id
    assert refs[0].external_id == "19:abc@thread.tacv2;messageid=1701"
    assert refs[2].external_id == "-100:7"
    assert ref_from_json({"kind": "discord", "where": "1"}, channel="discord") is None
