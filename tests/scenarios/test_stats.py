"""Approval fatigue, measured on a known history: two days of cards made by really running
the engine (`tests.peers.history`), on SQLite and PostgreSQL. The figures are the ones
`GET /api/stats`, the web page and `pizzabot stats` show (`pizzabot.agent.stats.compute` over
`SqlStore.cards`); the rule each repeat suggests, put in the skill, stops asking for it."""

from __future__ import annotations

import asyncio
import functools
import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import yaml

from pizzabot.agent.policy.rules import judge
from pizzabot.agent.skills import Skill
from pizzabot.agent.stats import compute, period_start
from tests.peers.history import ANN, BOB, SKILL, START, TOOLS, calls_in_input, make_history
from tests.peers.inproc import InProcess
from tests.peers.stack import _merge, default_skill
from tests.peers.triggers import FakeClock


def figures(stats: Any) -> dict[str, Any]:
    return stats.model_dump(mode="json", exclude={"since", "until"})


async def test_stats_of_a_known_history_are_exact(tmp_path: Path, db_url: str) -> None:
    clock = FakeClock()
    async with InProcess(tmp_path, calls_in_input, skill=SKILL, db_url=db_url, clock=clock) as h:
        await make_history(h, clock)
        now = clock()
        since = period_start("30d", now=now)
        stats = compute(await h.store.cards(since=since, until=now), since=since, until=now)
        day2 = START.replace(day=3, hour=0)
        later = compute(await h.store.cards(since=day2, until=now), since=day2, until=now)
        skill = h.skill
    got = figures(stats)
    assert got["cards"] == 9
    assert got["outcomes"] == {
        "approved": 6, "edited": 1, "rejected": 1, "expired": 0, "cancelled": 0,
        "pending": 1, "approve_rate": 0.75, "p50_seconds": 30.0, "p90_seconds": 600.0,
    }  # fmt: skip
    assert got["per_day"] == [
        {"day": "2026-11-02", "by": "", "cards": 2},
        {"day": "2026-11-03", "by": "", "cards": 7},
    ]
    assert got["per_day_person"] == [
        {"day": "2026-11-02", "by": "U1", "cards": 1},
        {"day": "2026-11-02", "by": "owner", "cards": 1},
        {"day": "2026-11-03", "by": "U1", "cards": 2},
        {"day": "2026-11-03", "by": "owner", "cards": 4},
    ]
    assert got["per_day_tool"] == [
        {"day": "2026-11-02", "by": "crm.send_email", "cards": 2},
        {"day": "2026-11-03", "by": "crm.send_email", "cards": 4},
        {"day": "2026-11-03", "by": "crm.slow", "cards": 3},
    ]
    people = {p["person"]: p for p in got["people"]}
    assert [p["person"] for p in got["people"]] == ["owner", "U1"]
    assert people["owner"] == {
        "person": "owner", "cards": 5, "days": 2, "busiest_day": 4,
        "approved": 4, "edited": 1, "rejected": 0, "expired": 0, "cancelled": 0, "pending": 0,
        "approve_rate": 0.8, "p50_seconds": 10.0, "p90_seconds": 600.0,
    }  # fmt: skip
    assert people["U1"] == {
        "person": "U1", "cards": 3, "days": 2, "busiest_day": 2,
        "approved": 2, "edited": 0, "rejected": 1, "expired": 0, "cancelled": 0, "pending": 0,
        "approve_rate": 0.6667, "p50_seconds": 120.0, "p90_seconds": 300.0,
    }  # fmt: skip
    tools = {t["tool"]: t for t in got["tools"]}
    assert [t["tool"] for t in got["tools"]] == ["crm.send_email", "crm.slow"]
    assert tools["crm.send_email"] == {
        "skill": "test", "tool": "crm.send_email", "cards": 6,
        "approved": 3, "edited": 1, "rejected": 1, "expired": 0, "cancelled": 0, "pending": 1,
        "approve_rate": 0.6, "p50_seconds": 120.0, "p90_seconds": 600.0,
    }  # fmt: skip
    assert tools["crm.slow"]["approve_rate"] == 1.0
    assert (tools["crm.slow"]["p50_seconds"], tools["crm.slow"]["p90_seconds"]) == (10.0, 10.0)

    # ann/hi was approved unchanged 3 of 3 times (bob's calls were not); crm.slow every time.
    repeats = [(r["tool"], r["kind"], r["approved"], r["args"]) for r in got["repeats"]]
    assert repeats == [("crm.send_email", "rule", 3, ANN), ("crm.slow", "policy", 3, None)]
    for r in got["repeats"]:
        _stops_asking(skill, r)

    # Since the second day: its seven cards only.
    assert later.cards == 7
    assert [(d.day, d.cards) for d in later.per_day] == [("2026-11-03", 7)]
    assert [(r.tool, r.approved) for r in later.repeats] == [("crm.slow", 3)]
    assert later.outcomes.p90_seconds == 600.0 and later.outcomes.p50_seconds == 10.0
    assert now - since == timedelta(days=30)


def _stops_asking(skill: Skill, repeat: dict[str, Any]) -> None:
    """The snippet, merged into the skill's entry for the tool, makes the repeated call auto
    (and, for a rule, leaves other arguments asked)."""
    entry = yaml.safe_load(repeat["snippet"])["tools"][repeat["tool"]]
    spec = skill.model_dump(mode="json", by_alias=True, exclude_none=True)
    spec["tools"] = {**spec["tools"], repeat["tool"]: {"policy": "ask", **entry}}
    changed = Skill.model_validate(spec)
    args = repeat["args"] or {"seconds": 0}
    assert judge(changed, repeat["tool"], args).policy == "auto"
    if repeat["args"] is not None:
        assert judge(changed, repeat["tool"], BOB).policy == "ask"


# -- `pizzabot policy test` on the same kind of history ----------------------------------------

WIDENED: dict[str, Any] = {
    "crm.send_email": {
        "policy": "ask",
        "rules": [{"when": {"to": "ann@example.com"}, "policy": "auto"}],
    },
    "crm.lookup": "auto",
    "crm.slow": "auto",
    "crm.fail": "ask",
}
NARROWED: dict[str, Any] = {
    "crm.send_email": {
        "policy": "ask",
        "rules": [{"when": {"to": "bob@example.com"}, "policy": "deny"}],
    },
    "crm.lookup": "ask",
    "crm.slow": {"policy": "ask", "approvals": {"required": 2}},
    "crm.fail": "deny",
}
SINCE = ("--since", "2026-11-01")
ANN_SHOWN = '{"body": "Hello", "subject": "hi", "to": "ann@example.com"}'
BOB_SHOWN = '{"body": "Hello", "subject": "yo", "to": "bob@example.com"}'


def skills_folder(root: Path, tools: dict[str, Any]) -> Path:
    folder = root
    folder.mkdir(parents=True)
    spec = _merge(default_skill("http://127.0.0.1:9/v1", tools_log=root / "log"), SKILL)
    spec["tools"] = tools
    (folder / "test.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    return folder


def policy_test(db_url: str, data: Path, folder: Path) -> subprocess.CompletedProcess[str]:
    """`pizzabot policy test FOLDER` on the server's host, with its settings."""
    env = {**os.environ, "PIZZABOT_DATA_DIR": str(data), "PIZZABOT_DATABASE_URL": db_url}
    return subprocess.run(
        [sys.executable, "-m", "pizzabot.bot.main", "policy", "test", str(folder), *SINCE],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


async def test_policy_test_shows_what_proposed_rules_change_and_fails_on_wider_access(
    tmp_path: Path, db_url: str
) -> None:
    clock = FakeClock()
    async with InProcess(tmp_path, calls_in_input, skill=SKILL, db_url=db_url, clock=clock) as h:
        await make_history(h, clock)
    data = tmp_path / "data"
    run = functools.partial(asyncio.to_thread, policy_test, db_url, data)

    same = await run(skills_folder(tmp_path / "same", TOOLS))
    assert (same.returncode, same.stderr) == (0, "")
    assert same.stdout == "11 call(s) replayed: 0 would change, 0 of them widening access\n"

    wider = await run(skills_folder(tmp_path / "wider", WIDENED))
    assert (wider.returncode, wider.stderr) == (1, "")
    assert wider.stdout.splitlines() == [
        "WIDENS   test  crm.fail: denied → allowed (denied → asked, by the policy of crm.fail):"
        " 1 call(s) in 1 run(s), e.g. {}",
        "WIDENS   test  crm.send_email: asked → auto (asked → auto, by rule 1 of"
        f" crm.send_email): 3 call(s) in 3 run(s), e.g. {ANN_SHOWN}",
        "WIDENS   test  crm.slow: asked → auto (asked → auto, by the policy of crm.slow):"
        ' 3 call(s) in 3 run(s), e.g. {"seconds": 0}',
        "11 call(s) replayed: 7 would change, 7 of them widening access",
    ]

    narrower = await run(skills_folder(tmp_path / "narrower", NARROWED))
    assert (narrower.returncode, narrower.stderr) == (0, "")
    assert narrower.stdout.splitlines() == [
        "narrows  test  crm.lookup: auto → asked (auto → asked, by the policy of crm.lookup):"
        ' 1 call(s) in 1 run(s), e.g. {"query": "ann"}',
        "narrows  test  crm.send_email: → denied (asked → denied, by rule 1 of"
        f" crm.send_email): 2 call(s) in 2 run(s), e.g. {BOB_SHOWN}",
        "narrows  test  crm.slow: more approvals (asked → asked (2 people), by the policy of"
        ' crm.slow): 3 call(s) in 3 run(s), e.g. {"seconds": 0}',
        "11 call(s) replayed: 6 would change, 0 of them widening access",
    ]

    # A proposed file the loader refuses is bad input, not a pass.
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "test.yaml").write_text("name: test\ntools: {crm.send_email: sometimes}\n")
    refused = await run(broken)
    assert refused.returncode == 2 and "the proposed skills do not load" in refused.stderr
