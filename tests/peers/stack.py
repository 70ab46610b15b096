"""A whole Pizza Bot stack for end-to-end tests: a real `pizzabot serve` process, a scripted
model server it reaches through the OpenAI SDK (`openai/` skills) or litellm, and the test
MCP server ("crm") over stdio or HTTP.

    async with Stack(tmp_path, script=turns(Reply(tool_calls=[...]), Reply(text="done"))) as st:
        run = await st.start_run("test", "mail the customer")
        item = await st.wait_item(run["id"], box="action")
        await st.decide(item["id"], "approve")
        run = await st.wait_run(run["id"], {"done"})
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import AsyncIterator
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx
import yaml

from pizzabot.agent.testing.model_server import ScriptedModelServer
from pizzabot.agent.testing.scripts import Reply, Script, ToolCall, turns
from tests.peers import mcp_tools
from tests.peers.server import ServerProcess
from tests.waiting import eventually

__all__ = ["Reply", "Stack", "ToolCall", "default_skill", "turns"]


def default_skill(
    model_base: str, *, tools_log: Path, mcp_url: str | None = None
) -> dict[str, Any]:
    crm: dict[str, Any] = (
        {"url": mcp_url}
        if mcp_url
        else {
            "command": "python",
            "args": [str(mcp_tools.SCRIPT), "stdio"],
            "env": {mcp_tools.LOG_ENV: str(tools_log)},
        }
    )
    return {
        "name": "test",
        "description": "end-to-end test skill",
        "instructions": "You are a test agent.",
        "model": "openai/scripted",
        "model_options": {"api_base": model_base, "api_key": "x"},
        "mcp_servers": {"crm": crm},
        "tools": {
            "crm.send_email": {
                "policy": "ask",
                "impact": "high",
                "reversible": False,
                "scope": "external",
            },
            "crm.lookup": "auto",
            "crm.slow": "auto",
            "crm.fail": "auto",
        },
    }


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict) and k != "tools":
            out[k] = _merge(out[k], v)
        else:
            out[k] = v
    return out


class Stack:
    def __init__(
        self,
        root: Path,
        *,
        script: Script,
        skill: dict[str, Any] | None = None,
        extra_skills: list[dict[str, Any]] | None = None,
        env: dict[str, str] | None = None,
        mcp: str = "stdio",
        args: list[str] | None = None,
    ) -> None:
        self.root = root
        self.script = script
        self.skill_over = skill or {}
        self.extra_skills = extra_skills or []
        self.env = env or {}
        self.mcp = mcp
        self.args = args or []
        self.tools_log = root / "tools.jsonl"
        self.skills_dir = root / "skills"
        self._stack = contextlib.AsyncExitStack()
        self.model: ScriptedModelServer
        self.server: ServerProcess
        self.mcp_url: str | None = None

    async def __aenter__(self) -> Stack:
        self.model = await self._stack.enter_async_context(ScriptedModelServer(self.script))
        if self.mcp == "http":
            self.mcp_url = await self._stack.enter_async_context(
                mcp_tools.serve_http(log=self.tools_log)
            )
        self.skills_dir.mkdir(parents=True, exist_ok=True)
        self.write_skill(self.skill_over)
        for extra in self.extra_skills:
            self.write_skill(extra)
        self.server = ServerProcess(
            data_dir=self.root / "data", skills_dir=self.skills_dir, env=self.env, args=self.args
        )
        self._stack.callback(self.server.stop)
        await self.server.start()
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self._stack.aclose()

    def write_skill(self, over: dict[str, Any]) -> Path:
        skill = _merge(
            default_skill(self.model.openai_base, tools_log=self.tools_log, mcp_url=self.mcp_url),
            over,
        )
        path = self.skills_dir / f"{skill['name']}.yaml"
        path.write_text(yaml.safe_dump(skill, sort_keys=False))
        return path

    def tool_calls(self) -> list[dict[str, Any]]:
        """What the test MCP tools were really called with (from their own log)."""
        return [
            line
            for line in mcp_tools.read_log(self.tools_log)
            if line.get("event") in {"called", "started"}
        ]

    # -- API helpers ---------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def client(self) -> AsyncIterator[httpx.AsyncClient]:
        async with self.server.client() as c:
            yield c

    async def start_run(self, skill: str = "test", text: str = "go") -> dict[str, Any]:
        async with self.client() as c:
            r = await c.post("/api/runs", json={"skill": skill, "input": text})
            assert r.status_code == 201, r.text
            data: dict[str, Any] = r.json()
            return data

    async def get_run(self, run_id: str) -> dict[str, Any]:
        async with self.client() as c:
            r = await c.get(f"/api/runs/{run_id}")
            assert r.status_code == 200, r.text
            data: dict[str, Any] = r.json()
            return data

    async def decide(
        self,
        item_id: str,
        decision: str,
        *,
        args: dict[str, Any] | None = None,
        reason: str | None = None,
    ) -> httpx.Response:
        body: dict[str, Any] = {"decision": decision}
        if args is not None:
            body["args"] = args
        if reason is not None:
            body["reason"] = reason
        async with self.client() as c:
            return await c.post(f"/api/items/{item_id}/decision", json=body)

    async def wait_run(
        self, run_id: str, statuses: set[str], *, timeout: float = 60.0
    ) -> dict[str, Any]:
        last: list[str] = []

        async def reached() -> dict[str, Any] | None:
            run = await self.get_run(run_id)
            last[:] = [run["status"]]
            return run if run["status"] in statuses else None

        return await eventually(
            reached,
            what=f"run {run_id} to be {' or '.join(sorted(statuses))}",
            timeout=timeout,
            interval=0.1,
            context=lambda: f"it is {last}\n{self.server.log()}",
        )

    async def wait_item(
        self,
        run_id: str,
        *,
        box: str = "action",
        status: str | None = None,
        count: int = 1,
        timeout: float = 60.0,
    ) -> dict[str, Any]:
        """The newest item of `run_id` in `box` once there are at least `count` of them."""
        async with self.client() as c:

            async def newest() -> dict[str, Any] | None:
                r = await c.get("/api/inbox", params={"box": box, "all": "true"})
                items = [
                    i
                    for i in r.json()["items"]
                    if i["run_id"] == run_id and (status is None or i["status"] == status)
                ]
                return items[0] if len(items) >= count else None

            return await eventually(
                newest,
                what=f"{count} {box} item(s) of run {run_id}",
                timeout=timeout,
                interval=0.1,
                context=self.server.log,
            )
