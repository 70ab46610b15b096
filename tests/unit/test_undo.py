"""`pizzabot.agent.undo` against the memory store and a recording tool server: what an FYI
offers, who may undo it, and what refuses an Undo before anything runs."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import pytest

from pizzabot.agent.context import Context
from pizzabot.agent.errors import AlreadyUndone, Conflict, KillSwitchOn, NotAllowed
from pizzabot.agent.model import Box, Item, ItemKind, ItemStatus
from pizzabot.agent.policy.principal import Principal
from pizzabot.agent.preview import Previewer
from pizzabot.agent.skills import Skill, SkillBook, parse_skill
from pizzabot.agent.testing.memory_store import MemoryStore
from pizzabot.agent.tools import AskFn, ToolOutcome, ToolSpec
from pizzabot.agent.undo import offer, undo

NOW = datetime(2026, 1, 1, 9, 0, tzinfo=UTC)
SKILL = """name: crm
instructions: hi
model: openai/gpt-4o
mcp_servers:
  crm: {command: crm}
approvers: {slack: [U1]}
tools:
  crm.add_contact:
    policy: notify
    undo: {tool: crm.delete_contact, args: {id: "{result.id}"}}
  crm.delete_contact:
    policy: ask
    rules:
      - when: {id: {eq: c-vip}}
        policy: deny
        reason: the VIP stays
"""


class Tools:
    """Answers every call "deleted", recording what was called."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, dict[str, Any]]] = []

    async def list_tools(self, skill: Skill) -> Sequence[ToolSpec]:
        return []

    async def call(
        self,
        skill: Skill,
        server: str,
        tool: str,
        args: dict[str, Any],
        *,
        ask: AskFn | None = None,
    ) -> ToolOutcome:
        self.calls.append((server, tool, args))
        return ToolOutcome("deleted", False, 1.0)

    async def aclose(self) -> None:
        return None


async def fyi(ctx: Context, answer: str) -> Item:
    skill = ctx.skills.get("crm")
    made, why_not = offer(skill, "crm.add_contact", {"email": "a@b.c"}, answer, failed=False)
    assert why_not is None
    run_id = f"r-{len(await ctx.store.list_runs())}"
    await ctx.store.create_run(run_id=run_id, skill="crm", input="hi", trigger="test", now=NOW)
    item = Item(
        id=f"i-{run_id}",
        run_id=run_id,
        skill="crm",
        box=Box.UNREAD,
        kind=ItemKind.RUN,
        status=ItemStatus.UNREAD,
        title="FYI",
        body="",
        created_at=NOW,
        tool="crm.add_contact",
        args={"email": "a@b.c"},
        undo=made,
    )
    return await ctx.store.create_item(item, targets=[], lease=None, now=NOW)


@pytest.fixture
def tools() -> Tools:
    return Tools()


@pytest.fixture
def ctx(tools: Tools) -> Context:
    skills = SkillBook({"crm": parse_skill(SKILL, "skills/crm.yaml")})
    return Context(store=MemoryStore(), skills=skills, clock=lambda: NOW, previews=Previewer(tools))


def test_no_undo_is_offered_where_the_answer_lacks_what_it_needs() -> None:
    skill = parse_skill(SKILL, "skills/crm.yaml")
    made, why = offer(skill, "crm.add_contact", {"email": "a@b.c"}, "added", failed=False)
    assert made is None and why is not None and "not JSON" in why
    made, why = offer(skill, "crm.add_contact", {}, '{"id": 1}', failed=True)
    assert made is None and why is not None and "failed" in why
    assert offer(skill, "crm.delete_contact", {}, "", failed=False) == (None, None)


async def test_an_approver_undoes_once(ctx: Context, tools: Tools) -> None:
    item = await fyi(ctx, '{"id": "c-1"}')
    with pytest.raises(NotAllowed):
        await undo(ctx, item.id, by=Principal.of("slack", "U2"))
    done = await undo(ctx, item.id, by=Principal.of("slack", "U1"))
    assert done.undo is not None and (done.undo.state, done.undo.outcome) == ("done", "deleted")
    assert tools.calls == [("crm", "delete_contact", {"id": "c-1"})]
    with pytest.raises(AlreadyUndone):
        await undo(ctx, item.id, by=Principal.owner("api"))
    assert len(tools.calls) == 1
    actions = [e.action for e in await ctx.store.audit_log()]
    assert actions.count("undone") == 1 and "undo_refused" in actions


async def test_the_kill_switch_and_a_deny_refuse_it(ctx: Context, tools: Tools) -> None:
    vip = await fyi(ctx, '{"id": "c-vip"}')
    with pytest.raises(Conflict, match="the VIP stays"):
        await undo(ctx, vip.id, by=Principal.owner("api"))
    other = await fyi(ctx, '{"id": "c-2"}')
    await ctx.store.set_kill(on=True, actor="owner", now=NOW, reason="incident")
    with pytest.raises(KillSwitchOn):
        await undo(ctx, other.id, by=Principal.owner("api"))
    assert tools.calls == []
    assert (await ctx.store.get_item(other.id)).undo.state == "offered"  # type: ignore[union-attr]
