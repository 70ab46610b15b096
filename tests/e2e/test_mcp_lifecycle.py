"""A skill's MCP servers live as long as the skill: a real `pizzabot serve` starts the servers
of the skills in its folder, `/api/status` lists them per skill, and removing a skill's file
ends its stdio server's process, while a server another skill shares with it keeps running.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psutil

from tests.peers import mcp_tools
from tests.peers.stack import Reply, Stack
from tests.waiting import eventually

ON_REQUEST = {"PIZZABOT_SKILLS_WATCH": "0"}

#: A second skill: the default skill's "crm" server (the same configuration, so shared) and a
#: "shop" server of its own.
SHOP: dict[str, Any] = {
    "name": "shop",
    "mcp_servers": {
        "shop": {"command": "python", "args": [str(mcp_tools.SCRIPT), "stdio", "shop"]},
    },
    "tools": {},
}


def shop_servers(server_pid: int) -> list[psutil.Process]:
    """The "shop" stdio servers the Pizza Bot process started."""
    family = psutil.Process(server_pid).children(recursive=True)
    found = []
    for proc in family:
        try:
            cmdline = proc.cmdline()
        except psutil.NoSuchProcess:
            continue
        if any("mcp_tools.py" in part for part in cmdline) and cmdline[-1] == "shop":
            found.append(proc)
    return found


async def status(st: Stack) -> dict[str, Any]:
    async with st.client() as c:
        r = await c.get("/api/status")
        assert r.status_code == 200, r.text
        data: dict[str, Any] = r.json()
        return data


async def test_removing_a_skill_file_ends_its_servers(tmp_path: Path) -> None:
    async with Stack(
        tmp_path, script=lambda m, t: Reply(text="ok"), extra_skills=[SHOP], env=ON_REQUEST
    ) as st:
        both = {"shop": ["crm", "shop"], "test": ["crm"]}

        async def started() -> dict[str, Any] | None:
            running = (await status(st))["mcp"]
            return running if running == both else None

        await eventually(started, what="both skills' servers to be started")
        assert st.server.proc is not None
        [shop] = shop_servers(st.server.proc.pid)

        (st.skills_dir / "shop.yaml").unlink()
        async with st.client() as c:
            r = await c.post("/api/skills/reload")
            assert r.status_code == 200, r.text
            assert r.json()["changes"]["removed"] == ["shop"]

        async def ended() -> bool:
            return not shop.is_running() or shop.status() == psutil.STATUS_ZOMBIE

        await eventually(ended, what="the removed skill's stdio server to end")
        assert (await status(st))["mcp"] == {"test": ["crm"]}  # the shared one runs on
