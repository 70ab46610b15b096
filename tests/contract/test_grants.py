"""The grants store's contract, on every backend that keeps grants (see conftest.py): one
grant per approval, looked up only for the calls it may cover, ended by revoking or expiry,
and every change audited."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from pizzabot.agent.errors import NotFound
from pizzabot.agent.model import RunStatus
from pizzabot.agent.policy.grants import Grant, Grants, make_grant
from pizzabot.agent.store import AuditLog, RunStore

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


async def test_grants_are_kept_looked_up_revoked_and_audited(
    grants: Grants, runs: RunStore, audit: AuditLog
) -> None:
    for run_id in ("r1", "r2"):
        await runs.create_run(run_id=run_id, skill="s", input="", trigger="t", now=T0)

    def made(choice: str, item: str, args: dict[str, object], run: str = "r1") -> Grant:
        return make_grant(
            choice,
            id=f"g-{item}",
            skill="s",
            tool="crm.send_email",
            args=args,
            run_id=run,
            item_id=item,
            granted_by="ann",
            granted_via="slack",
            now=T0,
        )

    run_grant = await grants.add(made("run", "i1", {"to": "a"}))
    hourly = await grants.add(made("1h", "i2", {"to": "b"}))
    exact = await grants.add(made("exact", "i3", {"to": "c", "n": 1}))
    # A second add for the same approval (a step repeated after a crash) keeps the first.
    again = await grants.add(made("8h", "i2", {}))
    assert again.id == hourly.id and again.choice == "1h"

    # The run's own grants, and the skill's others; never another tool's or skill's.
    mine = await grants.for_call(skill="s", tool="crm.send_email", run_id="r1", now=T0)
    assert [g.id for g in mine] == [run_grant.id, hourly.id, exact.id]
    other_run = await grants.for_call(skill="s", tool="crm.send_email", run_id="r2", now=T0)
    assert [g.id for g in other_run] == [hourly.id, exact.id]
    assert await grants.for_call(skill="s", tool="crm.lookup", run_id="r1", now=T0) == []
    assert await grants.for_call(skill="x", tool="crm.send_email", run_id="r1", now=T0) == []

    # Past the hour the hourly one is gone from lookups and from the listing.
    later = T0 + timedelta(hours=1, seconds=1)
    left = await grants.for_call(skill="s", tool="crm.send_email", run_id="r2", now=later)
    assert [g.id for g in left] == [exact.id]

    await grants.used(exact, run_id="r2", call_id="c1", now=T0)
    assert (await grants.get(exact.id)).uses == 1

    revoked = await grants.revoke(exact.id, actor="bob", channel="web", now=T0)
    assert (revoked.revoked_by, revoked.revoked_at) == ("bob", T0)
    twice = await grants.revoke(exact.id, actor="carl", channel="api", now=later)
    assert twice.revoked_by == "bob"  # a second revoke changes nothing
    assert [g.id for g in await grants.list_grants(now=T0)] == [hourly.id, run_grant.id]
    try:
        await grants.revoke("nope", actor="bob", channel="web", now=T0)
    except NotFound:
        pass
    else:
        raise AssertionError("revoking an unknown grant must say so")

    # A run grant ends, in the listing, with its run.
    await runs.set_status("r1", RunStatus.CANCELLED, lease=None, now=T0)
    assert [g.id for g in await grants.list_grants(now=T0)] == [hourly.id]
    assert len(await grants.list_grants(now=later, ended=True)) == 3

    actions = [e.action for e in await audit.audit_log()]
    assert actions.count("grant created") == 3
    assert actions.count("grant used") == 1 and actions.count("grant revoked") == 1
