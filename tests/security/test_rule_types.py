"""A deny rule is not dodged by a value's type, its spelling or a shell's reading of it.

Each story asks a real server (`POST /api/requests`, an inbox-only skill) for a call a rule
denies, written the way a lenient tool server reads the same as the denied value: an amount
sent as the text "5000" (the tool refunds 5000), "Prod" for prod, and the shipped approvals
skill's `rm -r /` as a shell would run it. Each must come back rejected by the rule, at once,
where it used to be approved or put on a card.
"""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import yaml

from tests.peers.server import ServerProcess

pytestmark = pytest.mark.asyncio(loop_scope="module")

ROOT = Path(__file__).resolve().parents[2]

PAYMENTS = {
    "name": "payments",
    "description": "what the payment agent may do",
    "tools": {
        "pay.refund": {
            "policy": "auto",
            "rules": [
                {
                    "when": {"amount": {"gt": 1000}},
                    "policy": "deny",
                    "reason": "refunds over 1,000 go through finance",
                }
            ],
        },
        "deploy.run": {
            "policy": "auto",
            "rules": [
                {"when": {"env": {"in": ["prod"]}}, "policy": "deny", "reason": "change freeze"}
            ],
        },
    },
}


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def server(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[ServerProcess]:
    root = tmp_path_factory.mktemp("rule-types")
    skills = root / "skills"
    skills.mkdir()
    (skills / "payments.yaml").write_text(yaml.safe_dump(PAYMENTS))
    shutil.copy(ROOT / "manifests" / "skills" / "approvals.yaml", skills / "approvals.yaml")
    proc = ServerProcess(data_dir=root / "data", skills_dir=skills)
    await proc.start()
    try:
        yield proc
    finally:
        proc.stop()


async def ask(server: ServerProcess, skill: str, tool: str, args: dict[str, Any]) -> Any:
    body = {"skill": skill, "title": f"{tool} {args}", "tool": tool, "args": args}
    async with server.client() as c:
        r = await c.post("/api/requests", json=body)
    assert r.status_code == 201, r.text
    return r.json()


@pytest.mark.parametrize("amount", ["5000", "5000.0", "5e3", True, [5000], {"value": 5000}])
async def test_an_amount_of_another_type_is_denied_by_a_gt_rule_not_approved(
    server: ServerProcess, amount: Any
) -> None:
    state = await ask(server, "payments", "pay.refund", {"amount": amount})

    assert state["status"] == "rejected", state
    assert state["decided_by"] == "rule 1 of pay.refund"
    assert state["reason"].startswith("refunds over 1,000 go through finance (amount is ")
    assert "and the rule compares numbers" in state["reason"]


async def test_a_number_is_still_compared_as_a_number(server: ServerProcess) -> None:
    assert (await ask(server, "payments", "pay.refund", {"amount": 5000}))["status"] == "rejected"
    fine = await ask(server, "payments", "pay.refund", {"amount": 999.5})
    assert fine["status"] == "approved" and fine["args"] == {"amount": 999.5}
    # Left out: a condition on a value that is not there does not hold.
    assert (await ask(server, "payments", "pay.refund", {}))["status"] == "approved"


@pytest.mark.parametrize(
    "env", ["Prod", "PROD", " prod", "prod\n", "ｐｒｏｄ", "pro\u200bd", ["prod"], 1]
)
async def test_prod_by_another_spelling_or_type_is_denied_by_an_in_rule(
    server: ServerProcess, env: Any
) -> None:
    state = await ask(server, "payments", "deploy.run", {"env": env})

    assert state["status"] == "rejected", state
    assert state["decided_by"] == "rule 1 of deploy.run"
    assert state["reason"].startswith("change freeze (env ")


async def test_another_environment_is_approved(server: ServerProcess) -> None:
    for env in ("staging", "production-eu", "pr0d"):
        state = await ask(server, "payments", "deploy.run", {"env": env})
        assert state["status"] == "approved", (env, state)


ROOT_REMOVED = [
    "rm -rf /",
    "rm -fr /",
    "rm -r -f /",
    "rm  -rf /",
    "rm -rf --no-preserve-root /",
    "rm -r /",
    "rm -R /",
    "rm --recursive --force /",
    "/bin/rm -rf /",
    "sudo rm -rf /",
    "sudo -u root rm -rf /",
    "FOO=1 rm -rf /",
    "command rm -rf /",
    "rm -rf /*",
    "rm -rf -- /",
    "rm -rf //",
    "rm -rf /tmp/..",
    "rm -rf '/'",
    'r\\m -rf "/"',
    "ls; rm -rf /",
    "ls && rm -rf /",
    "ls\nrm -rf /",
    "echo $(rm -rf /)",
    "echo `rm -rf /`",
    "bash -c 'rm -rf /'",
    "rm -rf $TARGET",
    "cd / && rm -rf *",
    "echo / | xargs rm -rf",
    "rm -rf > /dev/null /",
    "rm -rf 'never closed",
]


@pytest.mark.parametrize("command", ROOT_REMOVED)
async def test_the_approvals_skill_denies_removing_the_root_however_it_is_written(
    server: ServerProcess, command: str
) -> None:
    state = await ask(server, "approvals", "shell.run", {"command": command})

    assert state["status"] == "rejected", (command, state)
    assert state["decided_by"] == "rule 1 of shell.run"
    assert state["reason"].startswith("never this")


async def test_the_approvals_skill_still_lists_at_once_and_asks_about_the_rest(
    server: ServerProcess,
) -> None:
    assert (await ask(server, "approvals", "shell.run", {"command": "ls -la"}))[
        "status"
    ] == "approved"
    for command in ("rm -rf build", "rm -r ./dist", "echo rm -rf /tmp"):
        state = await ask(server, "approvals", "shell.run", {"command": command})
        assert state["status"] == "pending", (command, state)
