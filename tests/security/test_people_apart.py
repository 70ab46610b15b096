"""A two-person rule counts people: a skill that cannot tell its approvers apart is refused.

Approvers listed per channel (`approvers: {slack: [U1], email: [a@x]}`) say nothing of who
is who: U1 on Slack and a@x by email may be one human, whose approval on each channel then
counted as two people's. A tool that needs two or more people makes the skill refuse to
load, at that tool's `approvals` line, until `people:` joins each approver's identities.
A real server shows the refusal (`GET /api/skills`), keeps the other skills, and takes the
file once it is fixed.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from tests.peers.server import ServerProcess

pytestmark = pytest.mark.asyncio(loop_scope="module")

PER_CHANNEL = """\
name: payouts
description: payouts need two people
approvers:
  slack: [U0ANN]
  email: [ann@corp.example, bob@corp.example]
tools:
  bank.transfer:
    policy: ask
    approvals: {required: 2}
  bank.balance: auto
"""

ESCALATED = """\
name: wires
description: wires need two people, and escalate by mail
people:
  ann: {slack: U0ANN}
  bob: {slack: U0BOB}
approvers: [ann, bob]
tools:
  bank.wire:
    policy: ask
    escalate_after: 1h
    escalate_to: {email: [cfo@corp.example], approvers: {email: [cfo@corp.example]}}
    approvals: {required: 2}
"""

JOINED = """\
name: payouts
description: payouts need two people
people:
  ann: {slack: U0ANN, email: ann@corp.example}
  bob: {email: bob@corp.example}
approvers: [ann, bob]
tools:
  bank.transfer:
    policy: ask
    approvals: {required: 2}
  bank.balance: auto
"""

ONE_PERSON = """\
name: notes
description: one person decides, on either channel
approvers:
  slack: [U0ANN]
  email: [ann@corp.example]
tools:
  notes.write: ask
"""


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def server(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[ServerProcess]:
    root = tmp_path_factory.mktemp("people-apart")
    skills = root / "skills"
    skills.mkdir()
    (skills / "payouts.yaml").write_text(PER_CHANNEL)
    (skills / "wires.yaml").write_text(ESCALATED)
    (skills / "notes.yaml").write_text(ONE_PERSON)
    proc = ServerProcess(
        data_dir=root / "data", skills_dir=skills, env={"PIZZABOT_SKILLS_WATCH": "0"}
    )
    await proc.start()
    try:
        yield proc
    finally:
        proc.stop()


async def skills(server: ServerProcess) -> dict[str, Any]:
    async with server.client() as c:
        r = await c.get("/api/skills")
    assert r.status_code == 200, r.text
    listed: dict[str, Any] = r.json()
    return listed


def line_of(text: str, start: str, after: str = "") -> int:
    lines = text.splitlines()
    begin = (
        next(i for i, line in enumerate(lines) if line.strip().startswith(after)) if after else 0
    )
    return next(i for i in range(begin, len(lines)) if lines[i].strip().startswith(start)) + 1


async def test_per_channel_approvers_of_a_two_person_tool_refuse_the_skill_at_its_line(
    server: ServerProcess,
) -> None:
    listed = await skills(server)
    refused = {e["name"]: e for e in listed["errors"]}

    payouts = refused["payouts"]
    assert payouts["path"].endswith("payouts.yaml")
    assert payouts["line"] == line_of(PER_CHANNEL, "approvals:", "bank.transfer:") == 9
    assert payouts["message"].startswith(
        "tools.bank.transfer.approvals: 2 different people must approve bank.transfer, but "
    )
    assert "may be one person, who would count twice" in payouts["message"]
    assert "list each approver under people:" in payouts["message"]
    assert "slack U0ANN" in payouts["message"]

    wires = refused["wires"]
    assert wires["line"] == line_of(ESCALATED, "approvals:", "bank.wire:")
    assert "email cfo@corp.example" in wires["message"]

    # One person per item is no count at all: per-channel lists stay fine there.
    assert "notes" in [s["name"] for s in listed["items"]]
    assert "payouts" not in [s["name"] for s in listed["items"]]


async def test_a_request_to_the_refused_skill_is_refused_saying_why(
    server: ServerProcess,
) -> None:
    async with server.client() as c:
        r = await c.post(
            "/api/requests",
            json={"skill": "payouts", "title": "pay", "tool": "bank.transfer", "args": {}},
        )
    assert r.status_code == 422, r.text
    assert "may be one person" in r.json()["detail"]["errors"]["skill"]


async def test_joining_the_identities_under_people_loads_the_skill(
    server: ServerProcess,
) -> None:
    (server.skills_dir / "payouts.yaml").write_text(JOINED)
    async with server.client() as c:
        reload = await c.post("/api/skills/reload")
    assert reload.status_code == 200, reload.text
    assert "payouts" in reload.json()["changes"]["added"]
    assert [e["name"] for e in reload.json()["errors"]] == ["wires"]

    async with server.client() as c:
        r = await c.post(
            "/api/requests",
            json={"skill": "payouts", "title": "pay", "tool": "bank.transfer", "args": {}},
        )
        assert r.status_code == 201, r.text
        item = (await c.get(f"/api/items/{r.json()['item_id']}")).json()
    assert item["risk"]["approvals_required"] == 2
