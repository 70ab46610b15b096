"""The "100,000 waiting" part of `pizzabot bench`: decision latency and an engine process's
memory with a hundred thousand runs waiting on a decision.

Making that many runs wait through the model would take hours on a small machine, so one run
is made to wait through the engine and its rows (the run, its events, its inbox item, the
item's deliveries) are copied in the database with new ids, in batches of INSERT … SELECT.
A copy is what the engine would have written for the same run: the same columns, its own ids,
the tool request's event naming its own item. The audit trail is not copied (it is history,
a hash chain, and nothing reads it to carry a run on). SQLite only, the bench's default store.
"""

from __future__ import annotations

import asyncio
import gc
import json
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from bench.engine import (
    MIB,
    RunEnds,
    Sizes,
    count_status,
    engine_here,
    json_child,
    make_waiting,
    one_run,
    rss_bytes,
    time_decisions,
)
from bench.model import ModelProcess
from pizzabot.agent.model import Box, ItemStatus, RunStatus
from pizzabot.bot.services import Services
from pizzabot.store.sql import SqlStore

#: Copies made per transaction: large enough to be quick, small enough that the write lock is
#: not held for long.
CLONE_BATCH = 10_000

#: The columns of a copy that are not the source's own: its ids, and the secret of its card.
_RUN_COLUMNS = {"id": "printf('r%015x', n.k)", "idempotency_key": "NULL"}
_EVENT_COLUMNS = {
    "run_id": "printf('r%015x', n.k)",
    "data": "replace(s.data, :item, printf('i%015x', n.k))",
}
_ITEM_COLUMNS = {
    "id": "printf('i%015x', n.k)",
    "run_id": "printf('r%015x', n.k)",
    "secret": "lower(hex(randomblob(11)))",
}
_DELIVERY_COLUMNS = {
    "id": "printf('d%015x', n.k)",
    "item_id": "printf('i%015x', n.k)",
    "run_id": "printf('r%015x', n.k)",
}


async def _columns(conn: AsyncConnection, table: str) -> list[str]:
    rows = await conn.execute(text(f"PRAGMA table_info({table})"))
    return [str(r[1]) for r in rows]


async def _copy(
    conn: AsyncConnection,
    table: str,
    where: str,
    new: dict[str, str],
    params: dict[str, Any],
    *,
    skip: tuple[str, ...] = (),
) -> None:
    """Insert one copy of the source's rows of `table` per number in [start, end)."""
    cols = [c for c in await _columns(conn, table) if c not in skip]
    chosen = ", ".join(new.get(c, f"s.{c}") for c in cols)
    await conn.execute(
        text(
            "WITH RECURSIVE n(k) AS (SELECT :start UNION ALL SELECT k + 1 FROM n WHERE k + 1 < :end)"
            f" INSERT INTO {table} ({', '.join(cols)})"
            f" SELECT {chosen} FROM n, {table} AS s WHERE {where}"
        ),
        params,
    )


async def clone_waiting(store: SqlStore, run_id: str, count: int) -> None:
    """Make `count` copies of the waiting run `run_id`, each with its own ids."""
    async with store.engine.connect() as conn:
        item = (
            await conn.execute(text("SELECT id FROM items WHERE run_id = :r"), {"r": run_id})
        ).scalar_one()
    done = 0
    while done < count:
        n = min(CLONE_BATCH, count - done)
        params = {"src": run_id, "item": item, "start": done, "end": done + n}
        async with store.engine.begin() as conn:
            await _copy(conn, "runs", "s.id = :src", _RUN_COLUMNS, params)
            await _copy(conn, "events", "s.run_id = :src", _EVENT_COLUMNS, params, skip=("id",))
            await _copy(conn, "items", "s.id = :item", _ITEM_COLUMNS, params)
            await _copy(conn, "deliveries", "s.item_id = :item", _DELIVERY_COLUMNS, params)
        done += n


async def check_copies(store: SqlStore, source: str, want: int) -> None:
    """The store sees every copy as it sees the run copied: waiting, with one pending action
    item that its tool request's event names, and the same events."""
    from sqlalchemy import func, select

    from pizzabot.store.tables import ItemRow

    waiting = await count_status(store, RunStatus.WAITING)
    q = (
        select(func.count())
        .select_from(ItemRow)
        .where(ItemRow.box == Box.ACTION.value, ItemRow.status == ItemStatus.PENDING.value)
    )
    async with store.engine.connect() as conn:
        pending = int((await conn.execute(q)).scalar_one())
    if waiting < want or pending < want:
        raise RuntimeError(f"copies: {waiting} runs waiting, {pending} items pending, not {want}")
    copy = f"r{0:015x}"
    run, theirs = await store.get_run(copy), await store.events(copy)
    mine = await store.events(source)
    items = await store.list_items(run_id=copy, status=ItemStatus.PENDING)
    asked = [e.payload for e in theirs if getattr(e.payload, "item_id", None)]
    if (
        run.status is not RunStatus.WAITING
        or [type(e.payload) for e in theirs] != [type(e.payload) for e in mine]
        or len(items) != 1
        or [getattr(p, "item_id", None) for p in asked] != [items[0].id]
    ):
        raise RuntimeError(f"copy {copy} is not a waiting run like {source}")


async def _waiting_base(svc: Services, ends: RunEnds, count: int) -> str:
    """Warm the engine, make one run wait through it, and copy it to `count` waiting runs;
    return the id of the run copied."""
    await one_run(svc, ends, "bench-auto", f"warm-{uuid.uuid4().hex[:6]}", 1)
    await make_waiting(svc, 1, "wsrc", expect=1)
    (item,) = await svc.store.list_items(box=Box.ACTION, limit=1)
    source: str = item.run_id
    if count > 1:
        await clone_waiting(svc.store, source, count - 1)
        await check_copies(svc.store, source, count)
    return source


async def _timers_pass(svc: Services) -> float:
    """One whole pass of the approval clock, which reads every waiting item; its seconds."""
    assert svc.triggers is not None
    t0 = time.perf_counter()
    await svc.triggers.timers.tick()
    return time.perf_counter() - t0


async def bench_many_waiting(
    model: ModelProcess, url: str, work: Path, skills: Path, sizes: Sizes
) -> dict[str, Any]:
    """Decisions timed one at a time as in `bench_decisions`, with `many_waiting` runs
    waiting; then the memory of a fresh engine process before and after they exist."""
    ends = RunEnds()
    many, samples = sizes.many_waiting, sizes.many_samples
    async with engine_here(url, work, skills, ends=ends) as svc:
        t0 = time.perf_counter()
        await _waiting_base(svc, ends, many)
        made_s = time.perf_counter() - t0
        pass_s = await _timers_pass(svc)
        await make_waiting(svc, samples, "wd", expect=many + samples)
        await model.forget()
        items = await svc.store.list_items(box=Box.ACTION, status=ItemStatus.PENDING, limit=samples)
        figures = await time_decisions(svc, ends, items)
        still = await count_status(svc.store, RunStatus.WAITING)
        await model.forget()
    memory = await _memory_process(model, url.replace(".db", "-rss.db"), work, skills, many)
    return figures | {"waiting": still, "made_s": made_s, "timers_pass_s": pass_s} | memory


async def _memory_process(
    model: ModelProcess, url: str, work: Path, skills: Path, many: int
) -> dict[str, Any]:
    config = {"url": url, "work": str(work / "rss"), "skills": str(skills), "many": many}
    return await json_child("bench.waiting:memory_child", config, model, what="memory child")


def memory_child(config_json: str) -> None:
    """The engine process of the memory reading: prints its figures as one JSON line."""
    config = json.loads(config_json)
    print(json.dumps(asyncio.run(_memory(config))))


async def _memory(config: dict[str, Any]) -> dict[str, float]:
    """The baseline comes after the same warm-up (a run waited through the engine, a whole
    pass of the approval clock), the reading after the copies exist and another pass."""
    many = int(config["many"])
    ends = RunEnds()
    work, skills = Path(config["work"]), Path(config["skills"])
    async with engine_here(config["url"], work, skills, ends=ends) as svc:
        source = await _waiting_base(svc, ends, 1)
        await _timers_pass(svc)
        gc.collect()
        before, blocks_before = rss_bytes(), sys.getallocatedblocks()
        await clone_waiting(svc.store, source, many)
        await check_copies(svc.store, source, many)
        pass_s = await _timers_pass(svc)
        await _timers_pass(svc)
        gc.collect()
        after, blocks_after = rss_bytes(), sys.getallocatedblocks()
    return {
        "rss_before_mib": before / MIB,
        "rss_after_mib": after / MIB,
        "rss_delta_mib": (after - before) / MIB,
        "python_blocks_per_run": (blocks_after - blocks_before) / many,
        "rss_timers_pass_s": pass_s,
    }
