"""Several servers on one PostgreSQL database: each loads and watches its own skills folder,
and the shared audit trail says which folder each reload came from."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.peers.server import ServerProcess

SKILL = "name: notes\ndescription: {d}\ninstructions: take notes\nmodel: pizzabot/demo\n"


async def description(server: ServerProcess, want: str) -> str:
    async def check(c: Any) -> str | None:
        items = (await c.get("/api/skills")).json()["items"]
        return want if [s["description"] for s in items] == [want] else None

    found: str = await server.wait_for(check, what=f"description {want!r} on {server.url}")
    return found


async def test_each_server_watches_its_own_folder(tmp_path: Path, pg_url: str) -> None:
    env = {"PIZZABOT_DATABASE_URL": pg_url, "PIZZABOT_SKILLS_WATCH": "0.5"}
    servers = []
    for name in ("a", "b"):
        folder = tmp_path / f"skills-{name}"
        folder.mkdir()
        (folder / "notes.yaml").write_text(SKILL.format(d=f"{name} one"))
        servers.append(
            ServerProcess(
                data_dir=tmp_path / name, skills_dir=folder, env=env, args=["--no-worker"]
            )
        )
    a, b = servers
    await a.start()
    await b.start()
    try:
        (a.skills_dir / "notes.yaml").write_text(SKILL.format(d="a two"))
        await description(a, "a two")
        (b.skills_dir / "notes.yaml").write_text(SKILL.format(d="b two"))
        await description(b, "b two")
        await description(a, "a two")  # b's folder is not a's

        async with a.client() as c:
            entries = (await c.get("/api/audit")).json()["items"]
        reloads = [e["detail"]["folder"] for e in entries if e["action"] == "skills_reloaded"]
        assert reloads == [str(b.skills_dir), str(a.skills_dir)]
    finally:
        a.stop()
        b.stop()
