"""The CLI takes an id as the web page shows it (its first 8 characters), or any beginning
that only one id has; one that several ids begin is refused, naming them."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import defaultdict
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from tests.peers.server import TOKEN, ServerProcess

pytestmark = pytest.mark.asyncio(loop_scope="module")

ROOT = Path(__file__).resolve().parents[2]
PIZZABOT = str(Path(sys.executable).parent / "pizzabot")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def server(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[ServerProcess]:
    root = tmp_path_factory.mktemp("ids")
    proc = ServerProcess(data_dir=root / "data", skills_dir=ROOT / "manifests" / "skills")
    await proc.start()
    try:
        yield proc
    finally:
        proc.stop()


def cli(server: ServerProcess, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PIZZABOT_URL": server.url, "PIZZABOT_API_TOKEN": TOKEN}
    env["COLUMNS"] = "200"
    return subprocess.run([PIZZABOT, *args], env=env, capture_output=True, text=True, timeout=60)


async def request(server: ServerProcess, title: str) -> dict[str, str]:
    async with server.client() as c:
        body = {"skill": "approvals", "title": title, "tool": "deploy", "args": {"env": "prod"}}
        r = await c.post("/api/requests", json=body)
        assert r.status_code == 201, r.text
        return dict(r.json())


async def test_an_id_as_the_web_shows_it_finds_the_item_and_its_run(server: ServerProcess) -> None:
    made = await request(server, "Deploy 1.2")
    shown = cli(server, "item", made["item_id"][:8])
    assert shown.returncode == 0, shown.stderr
    assert "Deploy 1.2" in shown.stdout and made["item_id"] in shown.stdout
    async with server.client() as c:
        run_id = (await c.get(f"/api/items/{made['item_id']}")).json()["run_id"]
    run = cli(server, "show", run_id[:8])
    assert run.returncode == 0, run.stderr
    assert run_id in run.stdout
    rejected = cli(server, "reject", made["item_id"][:8], "not today")
    assert rejected.returncode == 0, rejected.stderr
    assert rejected.stdout.strip() == f"{made['item_id']}: rejected"


async def test_a_beginning_several_ids_share_is_refused_naming_them(server: ServerProcess) -> None:
    by_first: dict[str, list[str]] = defaultdict(list)
    n = 0
    # Ids are hex: among 17 items two begin alike.
    while not any(len(v) > 1 for v in by_first.values()):
        made = await request(server, f"Deploy {n}")
        by_first[made["item_id"][0]].append(made["item_id"])
        n += 1
    first, ids = next((k, v) for k, v in by_first.items() if len(v) > 1)
    refused = cli(server, "approve", first)
    assert refused.returncode == 2 and refused.stdout == ""
    line = refused.stderr.strip()
    assert line.startswith(f"error: '{first}' begins more than one item id (")
    assert all(i in line for i in ids) and line.endswith("give more of it.")

    async with server.client() as c:
        items = (await c.get("/api/inbox", params={"all": "true"})).json()["items"]
    none = next(
        p
        for p in ("0000000", "fffffff", "1234567")
        if not any(i["id"].startswith(p) for i in items)
    )
    unknown = cli(server, "item", none)
    assert unknown.returncode == 1
    assert unknown.stderr.strip() == (
        f"error: no item id begins with '{none}': `pizzabot inbox --all` lists them."
    )
