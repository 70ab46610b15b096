"""OAuth consents across processes on one PostgreSQL database: the service sends the
person's browser back to the public URL, which reaches whichever server process it reaches,
and the process that holds the run (another server, or a `pizzabot worker`, which serves no
HTTP at all) takes the code from the database and goes on.

Real processes, the scripted model, and the HTTPS MCP server with its own authorization
server (`tests/peers/mcp_oauth.py`); the public URL of the holder names the other process,
as a load balancer would send the callback there.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from pizzabot.agent.testing.model_server import ScriptedModelServer
from tests.conftest import fresh_pg_database
from tests.e2e.test_mcp_oauth_e2e import look_up_then_say
from tests.peers.mcp_oauth import OAuthMcp
from tests.peers.server import ServerProcess
from tests.waiting import eventually

pytestmark = [pytest.mark.postgres]


@contextlib.asynccontextmanager
async def world(tmp_path: Path) -> AsyncIterator[tuple[OAuthMcp, Path, dict[str, str]]]:
    """The peer, a skills folder whose `sales` reaches it, and the environment every process
    shares (the database, and trust in the peer's certificate)."""
    async with (
        OAuthMcp(tmp_path) as peer,
        ScriptedModelServer(look_up_then_say) as model,
        fresh_pg_database() as pg_url,
    ):
        skills = tmp_path / "skills"
        skills.mkdir()
        skill = {
            "name": "sales",
            "instructions": "Look people up.",
            "model": "openai/scripted",
            "model_options": {"api_base": model.openai_base, "api_key": "x"},
            "mcp_servers": {"crm": {"url": peer.url, "auth": "oauth"}},
            "tools": {"crm.lookup": "auto"},
        }
        (skills / "sales.yaml").write_text(yaml.safe_dump(skill))
        env = {
            "PIZZABOT_DATABASE_URL": pg_url,
            "SSL_CERT_FILE": str(peer.certs.ca_file),
            "PIZZABOT_LOG_LEVEL": "WARNING",
        }
        yield peer, skills, env


async def connect_from_the_card(server: ServerProcess, peer: OAuthMcp, run_id: str) -> str:
    """Wait for the run's "Connect" card, and follow its link as the person's browser would:
    the page the browser ends on, after the service sent it back."""
    async with server.client() as c:

        async def card() -> dict[str, Any] | None:
            r = await c.get("/api/inbox", params={"box": "action"})
            found = [i for i in r.json()["items"] if i["run_id"] == run_id]
            return found[0] if found and found[0]["status"] == "pending" else None

        item = await eventually(card, what="the Connect card", timeout=90, interval=0.2)
    assert item["title"].startswith("crm asks: Connect 127.0.0.1")
    verify = peer.certs.client_context()
    async with httpx.AsyncClient(verify=verify, follow_redirects=True, timeout=30) as browser:
        page = await browser.get(item["args"]["url"])
    assert page.status_code == 200 and page.text.startswith("Connected."), page.text
    return str(page.url)


def holds_tokens(data_dir: Path) -> bool:
    """Whether a process's data folder keeps tokens for `sales`'s `crm` (a process that only
    listed the skill's tools may keep its client registration there, and nothing more)."""
    try:
        return "tokens" in json.loads((data_dir / "mcp-auth" / "sales" / "crm.json").read_text())
    except FileNotFoundError:
        return False


async def run_ends(server: ServerProcess, run_id: str, logs: Any) -> dict[str, Any]:
    async with server.client() as c:

        async def ended() -> dict[str, Any] | None:
            run: dict[str, Any] = (await c.get(f"/api/runs/{run_id}")).json()
            return run if run["status"] in {"done", "failed"} else None

        return await eventually(ended, what="the run to end", timeout=90, context=logs)


async def start_run(server: ServerProcess, text: str) -> str:
    async with server.client() as c:
        r = await c.post("/api/runs", json={"skill": "sales", "input": text})
        assert r.status_code == 201, r.text
        run_id: str = r.json()["id"]
        return run_id


async def test_a_callback_on_another_server_completes_the_run_the_first_holds(
    tmp_path: Path,
) -> None:
    async with world(tmp_path) as (peer, skills, env):
        other = ServerProcess(
            data_dir=tmp_path / "other", skills_dir=skills, env=env, args=["--no-worker"]
        )
        holder = ServerProcess(
            data_dir=tmp_path / "holder",
            skills_dir=skills,
            env={**env, "PIZZABOT_PUBLIC_URL": other.url},
        )
        try:
            await other.start(timeout=90)
            await holder.start(timeout=90)
            run_id = await start_run(holder, "look Ann up")  # its worker holds the run
            landed = await connect_from_the_card(holder, peer, run_id)
            assert landed.startswith(f"{other.url}/mcp-auth/callback?")

            def logs() -> str:
                return f"--- holder ---\n{holder.log()}\n--- other ---\n{other.log()}"

            done = await run_ends(holder, run_id, logs)
            assert done["status"] == "done", logs()
            assert "Ann Lee" in done["result"]
            # The holder exchanged the code: the tokens are its own.
            assert holds_tokens(tmp_path / "holder") and not holds_tokens(tmp_path / "other")
            assert peer.provider.consents == 1
            # The link again (the person's browser history): used, refused, audited.
            async with other.client() as c:
                again = await c.get(landed.removeprefix(other.url))
                assert again.status_code == 400
                trail = (await c.get("/api/audit", params={"limit": 500})).json()["items"]
            actions = [e["action"] for e in trail]
            assert actions.count("mcp_auth_consent_answered") == 1
            assert actions.count("mcp_auth_callback_refused") == 1
        finally:
            holder.stop()
            other.stop()


async def test_a_worker_runs_a_server_a_person_connects(tmp_path: Path) -> None:
    async with world(tmp_path) as (peer, skills, env):
        server = ServerProcess(
            data_dir=tmp_path / "server", skills_dir=skills, env=env, args=["--no-worker"]
        )
        worker_dir = tmp_path / "worker"
        worker_dir.mkdir()
        log = tmp_path / "worker.log"
        worker: subprocess.Popen[bytes] | None = None
        try:
            await server.start(timeout=90)
            worker_env = {
                **server.env(),
                "PIZZABOT_DATA_DIR": str(worker_dir),
                "PIZZABOT_PUBLIC_URL": server.url,
            }
            with open(log, "wb") as out:
                worker = subprocess.Popen(
                    [sys.executable, "-m", "pizzabot.bot.main", "worker"],
                    env=worker_env,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )

            def logs() -> str:
                worker_log = log.read_text(errors="replace")[-3000:]
                return f"--- server ---\n{server.log()}\n--- worker ---\n{worker_log}"

            async def ready() -> bool:
                assert worker is not None and worker.poll() is None, logs()
                return "worker ready" in log.read_text(errors="replace")

            await eventually(ready, what="the worker to be ready", timeout=90, context=logs)
            run_id = await start_run(server, "look Ann up")
            landed = await connect_from_the_card(server, peer, run_id)
            assert landed.startswith(f"{server.url}/mcp-auth/callback?")
            done = await run_ends(server, run_id, logs)
            assert done["status"] == "done", logs()
            assert "Ann Lee" in done["result"]
            # The worker held the run, exchanged the code and keeps the tokens.
            assert holds_tokens(worker_dir) and not holds_tokens(tmp_path / "server")
            assert peer.provider.consents == 1
        finally:
            if worker is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(worker.pid, signal.SIGTERM)
                try:
                    worker.wait(10)
                except subprocess.TimeoutExpired:
                    os.killpg(worker.pid, signal.SIGKILL)
                    worker.wait(10)
            server.stop()
