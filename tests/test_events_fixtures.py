"""Event logs written by earlier versions still load, and rebuild the same run.

Each fixture in tests/fixtures/event_logs/ is a run's log as an earlier engine stored it. The
rows go into a real SQLite database as they were, are read back through the store (which
checks every payload against its kind), and must give the model the same conversation, the
same usage and the same timeline; stored again, a payload is the same JSON.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError
from sqlalchemy import text

from pizzabot.agent import conversation
from pizzabot.agent.events import Event, UnknownEventVersion
from pizzabot.agent.timeline import entries
from pizzabot.store.migrate import upgrade
from pizzabot.store.sql import SqlStore, connect

FIXTURES = sorted((Path(__file__).parent / "fixtures" / "event_logs").glob("*.json"))
LOGS = {path.stem: json.loads(path.read_text()) for path in FIXTURES}
T0 = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
INSTRUCTIONS = "You are a test agent."


async def _stored(tmp_path: Path, rows: list[dict[str, Any]]) -> list[Event]:
    """Write `rows` into a fresh database as an older server did, and read them back."""
    engine = connect(f"sqlite+aiosqlite:///{tmp_path / 'old.db'}")
    await upgrade(engine)
    store = SqlStore(engine)
    try:
        await store.create_run(run_id="old", skill="test", input="", trigger="test", now=T0)
        async with engine.begin() as c:
            for row in rows:
                await c.execute(
                    text(
                        "INSERT INTO events (run_id, seq, kind, data, at, version)"
                        " VALUES ('old', :seq, :kind, :data, :at, :version)"
                    ),
                    {**row, "data": json.dumps(row["data"]), "at": T0},
                )
        return await store.events("old")
    finally:
        await store.aclose()


def test_every_kind_of_story_has_a_fixture() -> None:
    names = set(LOGS)
    assert {"auto_call", "ask_approve", "edit", "reject", "expired", "budget_extend"} <= names
    assert {"crash_ask", "crash_auto", "follow_up", "reminded_escalated"} <= names


@pytest.mark.parametrize("name", sorted(LOGS))
async def test_an_old_log_loads_and_rebuilds_the_same_run(tmp_path: Path, name: str) -> None:
    doc = LOGS[name]
    expected = doc["expected"]
    events = await _stored(tmp_path, doc["events"])

    assert [e.kind.value for e in events] == [e["kind"] for e in doc["events"]]
    # Stored again, every payload is the JSON it was read from.
    assert [e.data for e in events] == [e["data"] for e in doc["events"]]
    state = conversation.derive(events)
    assert conversation.messages(INSTRUCTIONS, events, state) == expected["messages"]
    assert [c.id for c in state.pending()] == expected["pending"]
    assert state.finished is expected["finished"]
    usage = state.usage
    assert [usage.tokens, usage.cost_usd, usage.steps, usage.cost_known] == [
        expected["usage"]["tokens"],
        expected["usage"]["cost_usd"],
        expected["usage"]["steps"],
        expected["usage"]["cost_known"],
    ]
    assert [e.title for e in entries(events)] == expected["timeline"]


async def test_an_event_of_an_unknown_schema_version_is_refused(tmp_path: Path) -> None:
    row = {"seq": 1, "kind": "run_started", "version": 2, "data": {"input": "hi"}}
    with pytest.raises(UnknownEventVersion, match="schema version 2"):
        await _stored(tmp_path, [row])


async def test_a_payload_that_does_not_fit_its_kind_is_refused(tmp_path: Path) -> None:
    row = {"seq": 1, "kind": "tool_result", "version": 1, "data": {"text": "no call id"}}
    with pytest.raises(ValidationError, match="call_id"):
        await _stored(tmp_path, [row])
