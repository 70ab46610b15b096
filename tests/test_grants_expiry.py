"""A grant for a while ends on time: the engine in-process with a clock the test moves, the
scripted model server, and the real MCP tool over stdio."""

from __future__ import annotations

from pathlib import Path

from pizzabot.agent.model import Approve, Box, Item, ItemStatus
from pizzabot.agent.policy import Principal
from tests.peers.grant_stories import calls, calls_from_input, sent
from tests.peers.inproc import InProcess
from tests.peers.mcp_tools import read_log
from tests.peers.triggers import FakeClock
from tests.waiting import eventually


async def pending(h: InProcess, run_id: str) -> Item:
    async def found() -> Item | None:
        items = await h.store.list_items(box=Box.ACTION, status=ItemStatus.PENDING, run_id=run_id)
        return items[0] if items else None

    return await eventually(found, what=f"a pending item of run {run_id}")


async def test_an_hour_long_grant_stops_covering_calls_after_the_hour(tmp_path: Path) -> None:
    clock = FakeClock()
    async with InProcess(tmp_path, calls_from_input, clock=clock) as h:
        run = await h.runs.start("test", calls(("a@x.example", "one")), by=Principal.owner("api"))
        item = await pending(h, run.id)
        assert item.risk.grants == ("run", "1h", "exact")
        await h.inbox.decide(item.id, Approve(grant="1h"), by=Principal.owner("web"))
        await h.wait(run.id, {"done"})
        assert h.ctx.grants is not None
        (grant,) = await h.ctx.grants.list_grants(now=clock())
        assert grant.expires_at is not None
        assert (grant.expires_at - grant.granted_at).total_seconds() == 3600

        # 59 minutes later the grant still holds: the call runs without asking.
        clock.advance(minutes=59)
        run = await h.runs.start("test", calls(("b@x.example", "two")), by=Principal.owner("api"))
        assert (await h.wait(run.id, {"done", "waiting"})).status == "done"
        assert sent(read_log(h.tools_log))[-1] == "two"

        # Past the hour it has expired: the next call asks, and the listing leaves it out.
        clock.advance(minutes=2)
        run = await h.runs.start("test", calls(("c@x.example", "three")), by=Principal.owner("api"))
        item = await pending(h, run.id)
        assert item.args is not None and item.args["subject"] == "three"
        assert await h.ctx.grants.list_grants(now=clock()) == []
        (ended,) = await h.ctx.grants.list_grants(now=clock(), ended=True)
        assert ended.uses == 1 and not ended.holds(clock())
        assert sent(read_log(h.tools_log)) == ["one", "two"]
