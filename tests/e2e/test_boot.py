"""`pizzabot serve` answers /healthz at once and /readyz once the app has started; a start
that fails ends the process with a non-zero code instead of a server that never becomes ready."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from contextlib import AsyncExitStack
from pathlib import Path

import httpx
import psutil
import yaml

from pizzabot.bot.boot import BootApp
from tests.imports import loaded_by
from tests.peers import mcp_tools
from tests.peers.server import ServerProcess
from tests.waiting import eventually


async def test_alive_at_once_then_ready(tmp_path: Path) -> None:
    server = ServerProcess(data_dir=tmp_path / "data", skills_dir=tmp_path)
    server.data_dir.mkdir()
    proc = subprocess.Popen(
        [sys.executable, "-m", "pizzabot.bot.main", "serve"],
        env=server.env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    server.proc = proc
    seen: list[tuple[int, int]] = []
    try:
        async with httpx.AsyncClient(base_url=server.url, timeout=2) as c:

            async def ready_now() -> bool:
                """Record what the server answers; until it is ready, it is alive and the
                API says "come back in a second"."""
                try:
                    health, ready = await c.get("/healthz"), await c.get("/readyz")
                except httpx.TransportError:
                    return False  # not listening yet
                seen.append((health.status_code, ready.status_code))
                if ready.status_code == 200:
                    return True
                assert health.json() == {"ok": True, "ready": False}
                api = await c.get("/api/runs")
                if api.status_code == 401:
                    # The real app took over between the two requests: it must be ready now.
                    assert (await c.get("/readyz")).status_code == 200
                    return False  # the next look records it
                assert api.status_code == 503 and api.headers["retry-after"] == "1"
                return False

            await eventually(ready_now, what="the server to be ready", timeout=60, interval=0.02)
            assert seen[-1] == (200, 200)
            assert (await c.get("/healthz")).json() == {"ok": True, "ready": True}
            assert (
                await c.get("/api/runs")
            ).status_code == 401  # the real app, which wants a token
    finally:
        server.stop()


async def test_a_failed_start_exits_non_zero(tmp_path: Path) -> None:
    server = ServerProcess(
        data_dir=tmp_path / "data",
        skills_dir=tmp_path,
        env={"PIZZABOT_DATABASE_URL": "postgresql+asyncpg://nobody@127.0.0.1:1/none"},
    )
    server.data_dir.mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "pizzabot.bot.main", "serve"],
        env=server.env(),
        capture_output=True,
        timeout=60,
        text=True,
    )
    assert done.returncode == 1 and "could not start" in done.stderr


async def test_the_boot_app_hands_over_to_the_built_app() -> None:
    from fastapi import FastAPI

    real = FastAPI()

    @real.get("/hello")
    async def hello() -> dict[str, str]:
        return {"hi": "there"}

    closed: list[str] = []

    async def build(stack: AsyncExitStack) -> FastAPI:
        # What the build starts beside the app (the skills' MCP servers) closes at shutdown.
        async def close() -> None:
            closed.append("started beside the app")

        stack.push_async_callback(close)
        return real

    handed_over = asyncio.Event()
    boot = BootApp(build, on_failure=lambda: None, on_ready=lambda _: handed_over.set())
    messages = [{"type": "lifespan.startup"}]
    sent: list[dict[str, object]] = []
    stop = asyncio.Event()

    async def receive() -> dict[str, object]:
        if messages:
            return messages.pop(0)
        await stop.wait()
        return {"type": "lifespan.shutdown"}

    async def send(message: dict[str, object]) -> None:
        sent.append(message)

    lifespan = asyncio.create_task(boot({"type": "lifespan"}, receive, send))  # type: ignore[arg-type]
    async with asyncio.timeout(10):
        await handed_over.wait()
    assert boot.ready
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=boot), base_url="http://t") as c:
        assert (await c.get("/hello")).json() == {"hi": "there"}
    assert closed == []
    stop.set()
    await lifespan
    assert closed == ["started beside the app"]
    assert [m["type"] for m in sent] == ["lifespan.startup.complete", "lifespan.shutdown.complete"]


def test_what_serve_loads_before_it_listens_leaves_the_app_for_later() -> None:
    # Everything `serve` imports before uvicorn listens delays /healthz; the app's stack
    # (SQLAlchemy, FastAPI, the engine's store and channels) is built on the boot thread.
    serve_needs = [
        "pizzabot.bot.main",
        "pizzabot.bot.banner",
        "pizzabot.bot.boot",
        "pizzabot.bot.listen",
        "pizzabot.bot.logs",
        "pizzabot.bot.settings",
    ]
    heavy = ["fastapi", "litellm", "openai", "sqlalchemy", "store", "channels", "mcp"]
    app = ["pizzabot.bot.server", "pizzabot.bot.core", "pizzabot.bot.services"]
    assert loaded_by(serve_needs, among=heavy + app) == []


async def test_a_skills_mcp_server_is_started_at_start_up_before_any_run(tmp_path: Path) -> None:
    # The first run should not wait for its MCP server: the server starts it after /readyz.
    skills = tmp_path / "skills"
    skills.mkdir()
    crm = {"command": "python", "args": [str(mcp_tools.SCRIPT), "stdio"]}
    skill = {
        "name": "warm",
        "instructions": "You are a test agent.",
        "model": "openai/scripted",
        "model_options": {"api_base": "http://127.0.0.1:9/v1", "api_key": "x"},
        "mcp_servers": {"crm": crm},
        "tools": {"crm.lookup": "auto"},
    }
    (skills / "warm.yaml").write_text(yaml.safe_dump(skill))
    server = ServerProcess(data_dir=tmp_path / "data", skills_dir=skills)
    await server.start()
    try:
        assert server.proc is not None
        parent = psutil.Process(server.proc.pid)

        def crm_started() -> bool:
            # The SDK starts a stdio server in a session of its own: look by parent, not group.
            return any(
                str(mcp_tools.SCRIPT) in " ".join(child.cmdline())
                for child in parent.children(recursive=True)
            )

        await eventually(
            crm_started,
            what="the skill's MCP server to be started",
            timeout=30,
            retry_on=(psutil.Error,),
            context=server.log,
        )
        async with server.client() as c:
            assert (await c.get("/api/runs")).json()["items"] == []
    finally:
        server.stop()


async def test_the_skills_mcp_servers_start_first_and_the_built_server_runs_with_them(
    tmp_path: Path,
) -> None:
    # `serve` starts the skills' stdio servers before it builds the app, so the first run
    # does not wait for them after the build; the server then runs with those very servers.
    from pizzabot.bot.mcp_servers import start_first
    from pizzabot.bot.server import build, shutdown, warm
    from pizzabot.bot.settings import Settings

    skills = tmp_path / "skills"
    skills.mkdir()
    crm = {"command": "python", "args": [str(mcp_tools.SCRIPT), "stdio"]}
    model = {"model": "openai/scripted", "model_options": {"api_base": "http://127.0.0.1:9/v1"}}

    def write(name: str, servers: dict[str, dict[str, object]]) -> None:
        skill = {"name": name, "instructions": "A test agent.", "mcp_servers": servers}
        (skills / f"{name}.yaml").write_text(yaml.safe_dump(skill | model))

    write("warm", {"crm": crm})
    write("also-warm", {"crm": crm})  # the same configuration: one process for both
    # A server that cannot start holds up neither the others nor the start.
    write("gone", {"gone": {"command": str(tmp_path / "no-such-server")}})
    (skills / "broken.yaml").write_text("name: broken\ninstructions: [unclosed\n")
    settings = Settings(data_dir=tmp_path / "data", skills_dir=skills)
    me = psutil.Process()

    def stdio_crms() -> int:
        return sum(
            f"{mcp_tools.SCRIPT} stdio" in " ".join(child.cmdline())
            for child in me.children(recursive=True)
        )

    async with mcp_tools.serve_http() as url:
        # An HTTP server waits for the warm-up (an OAuth one may need a consent from the store).
        write("hosted", {"far": {"url": url}})
        hub = await start_first(settings)
        try:
            await eventually(
                lambda: hub.running() == {"also-warm": ["crm"], "warm": ["crm"]},
                what="the skills' stdio server to be up before anything else is built",
                timeout=30,
            )
            assert stdio_crms() == 1
            svc = await build(settings, token="t" * 32, with_worker=False, tools=hub)
        except BaseException:
            await hub.aclose()
            raise
        try:
            assert svc.tools is hub
            await warm(svc)  # what a started server does next: the stdio one is up already
            assert hub.running() == {"also-warm": ["crm"], "hosted": ["far"], "warm": ["crm"]}
            assert stdio_crms() == 1
        finally:
            await shutdown(svc)
    await eventually(
        lambda: stdio_crms() == 0,
        what="the server stopped",
        timeout=10,
        retry_on=(psutil.Error,),
    )
