"""Inbox-only skills in the engine's own process: they run nothing of their own, and their
requests' time-outs follow the injected clock (a request's own over its tool's)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from pizzabot.agent.errors import InboxOnly, InvalidArguments, NotFound, UserError
from pizzabot.agent.llm import LiteLLMClient
from pizzabot.agent.model import ItemStatus
from pizzabot.agent.policy import Principal
from pizzabot.agent.requests import NewRequest, Requests
from pizzabot.agent.skills import SkillBook, SkillFileError, parse_skill
from pizzabot.agent.timers import Timers
from pizzabot.bot.core import build
from pizzabot.store.migrate import upgrade
from pizzabot.store.sql import SqlStore, connect
from pizzabot.store.triggers import TriggerStore

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)

DEPLOYS = """
name: deploys
tools:
  deploy.prod: {policy: ask, timeout: 2h}
  ask_human: {timeout: 30m}
"""


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqlStore]:
    engine = connect(f"sqlite+aiosqlite:///{tmp_path / 'db.sqlite'}")
    await upgrade(engine)
    s = SqlStore(engine)
    yield s
    await s.aclose()


def test_a_skill_without_a_model_is_inbox_only_and_says_what_it_cannot_have() -> None:
    assert parse_skill(DEPLOYS, "deploys.yaml").inbox_only
    for key, value in (("schedules", "[{every: 1h}]"), ("mcp_servers", "{a: {url: x}}")):
        with pytest.raises(SkillFileError, match=f"{key}: a skill without a model is inbox-only"):
            parse_skill(f"name: x\n{key}: {value}\n", "x.yaml")


async def test_no_run_of_an_inbox_only_skill_starts_and_no_model_is_called(
    store: SqlStore,
) -> None:
    skill = parse_skill(DEPLOYS, "deploys.yaml")
    runs = build(store=store, skills=SkillBook({"deploys": skill}), channels={}, mind=None).runs
    with pytest.raises(InboxOnly) as caught:
        await runs.start("deploys", "go", by=Principal.owner("api"))
    # The API answers 422 naming the skill; a channel says it as for an unknown skill.
    assert isinstance(caught.value, InvalidArguments) and isinstance(caught.value, NotFound)
    assert str(caught.value).startswith("deploys is inbox-only: it answers requests")
    assert caught.value.errors == {"skill": str(caught.value)}
    assert await store.list_runs() == []
    with pytest.raises(UserError, match="inbox-only"):
        await LiteLLMClient(env={}).complete(skill, [], [])


async def test_a_requests_own_timeout_wins_over_its_tools(store: SqlStore) -> None:
    clock = Clock()
    skills = SkillBook({"deploys": parse_skill(DEPLOYS, "deploys.yaml")})
    core = build(store=store, skills=skills, channels={}, mind=None, clock=clock)
    ctx, inbox = core.ctx, core.inbox
    requests = Requests(ctx)
    timers = Timers(ctx, inbox, TriggerStore(store))
    own, _ = await requests.create(
        NewRequest(skill="deploys", title="t", tool="deploy.prod", timeout=60),
        by=Principal.owner("api"),
    )
    tools, _ = await requests.create(
        NewRequest(skill="deploys", title="t", tool="deploy.prod"), by=Principal.owner("api")
    )
    question, _ = await requests.create(
        NewRequest(skill="deploys", title="t", question="Which region?"), by=Principal.owner("api")
    )

    clock.now = T0 + timedelta(seconds=59)
    assert await timers.tick() == []
    clock.now = T0 + timedelta(seconds=61)
    assert [(a.item_id, a.kind) for a in await timers.tick()] == [(own.item_id, "expired")]
    expired = await requests.get(own.id, by=Principal.owner("api"))
    assert (expired.status, expired.reason) == ("expired", "no one answered within 1m")

    clock.now = T0 + timedelta(minutes=31)  # ask_human's time-out
    assert [a.item_id for a in await timers.tick()] == [question.item_id]
    assert (await requests.get(question.id, by=Principal.owner("api"))).status == "expired"
    clock.now = T0 + timedelta(hours=2)  # deploy.prod's
    assert [a.item_id for a in await timers.tick()] == [tools.item_id]
    assert (await store.get_item(tools.item_id)).status is ItemStatus.EXPIRED
