"""The container files, checked by running what they run. The docker client is installed here
but no engine runs (and a build would need the registry), so the image's command is started the
way the container starts it: with the environment the Dockerfile sets, no API token given, the
data folder standing for the /data volume, and the working directory standing for the user's
home. The compose file is read as data, and `docker compose config` checks it where the plugin
is installed."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest
import yaml

from tests.peers.server import free_port
from tests.waiting import eventually

ROOT = Path(__file__).resolve().parent.parent
DOCKER = ROOT / "docker"


def instructions() -> list[tuple[str, str]]:
    """The Dockerfile as (INSTRUCTION, arguments), continuation lines joined, comments out."""
    out: list[tuple[str, str]] = []
    pending = ""
    for raw in (DOCKER / "Dockerfile").read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line, pending = pending + line, ""
        word, _, rest = line.partition(" ")
        out.append((word.upper(), rest.strip()))
    return out


def args_of(name: str) -> list[str]:
    return [rest for word, rest in instructions() if word == name]


def image_env() -> dict[str, str]:
    env: dict[str, str] = {}
    for rest in args_of("ENV"):
        for pair in shlex.split(rest):
            key, _, value = pair.partition("=")
            env[key] = value
    return env


def exec_form(rest: str) -> list[str]:
    """The JSON ("exec") form of CMD / HEALTHCHECK CMD; the shell form would need a shell."""
    words: list[str] = json.loads(rest)
    return words


def healthcheck_command() -> list[str]:
    (rest,) = args_of("HEALTHCHECK")
    _, _, command = rest.partition("CMD ")
    return exec_form(command)


def volumes() -> list[str]:
    return [v for rest in args_of("VOLUME") for v in json.loads(rest)]


def test_the_image_does_not_run_as_root() -> None:
    # MCP servers run with the server's rights. Which user a container runs as is the one
    # fact here that no run outside a container can show, so it is read from the file.
    (user,) = args_of("USER")
    assert user.split(":")[0] not in {"root", "0"}


def test_the_servers_pins_agree_with_the_lock() -> None:
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    lock = {
        name.lower(): version
        for name, version in re.findall(
            r"^([A-Za-z0-9_.-]+)==(\S+)", (ROOT / "requirements.lock").read_text(), re.M
        )
    }
    client = tomllib.loads((ROOT / "client" / "pyproject.toml").read_text())["project"]
    for dep in deps:
        # The image installs the lock, then the server without its dependencies: a pin the
        # lock does not hold would be missing from the image.
        name, _, version = re.sub(r"\[.*\]", "", dep).partition("==")
        if name == client["name"]:  # this repository's own, installed from client/
            assert version == client["version"], dep
            continue
        assert lock.get(name.lower().replace("_", "-")) == version, dep


def test_the_build_context_leaves_the_virtualenv_out() -> None:
    ignored = (DOCKER / "Dockerfile.dockerignore").read_text().split()
    assert {".venv", ".git"} <= set(ignored)


def _as_the_image_sets_it(data: Path, home: Path, port: int) -> dict[str, str]:
    """The container's environment, its paths moved to where this checkout has them."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIZZABOT_")}
    for key, value in image_env().items():
        env[key] = value.replace("/data", str(data)).replace("/app/", f"{ROOT}/")
    env["PIZZABOT_PORT"] = str(port)  # the image's own port may be taken on this machine
    env["HOME"] = str(home)
    # `pizzabot` as the image has it: the console script on the PATH.
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return env


async def test_the_image_command_serves_and_keeps_its_data_in_the_volume(tmp_path: Path) -> None:
    data, home = tmp_path / "data", tmp_path / "home"
    data.mkdir()  # the image makes /data, empty, for its user
    home.mkdir()
    assert image_env()["PIZZABOT_DATA_DIR"] in volumes()
    port = free_port()
    env = _as_the_image_sets_it(data, home, port)
    command = exec_form(args_of("CMD")[0])
    assert shutil.which(command[0], path=env["PATH"]) is not None
    health = healthcheck_command()
    log = tmp_path / "serve.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            command, env=env, cwd=home, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    base = f"http://127.0.0.1:{port}"

    def server_log() -> str:
        return log.read_text(errors="replace")[-3000:]

    async def answers(path: str) -> bool:
        assert proc.poll() is None, server_log()
        async with httpx.AsyncClient(timeout=2) as c:
            return (await c.get(base + path)).status_code == 200

    try:
        await eventually(
            lambda: answers("/healthz"),
            what="/healthz",
            timeout=60,
            retry_on=(httpx.HTTPError,),
            context=server_log,
        )
        # The image's HEALTHCHECK sees a healthy server.
        assert subprocess.run(health, env=env, timeout=30).returncode == 0
        await eventually(lambda: answers("/readyz"), what="/readyz", timeout=60)
        # Published ports reach only an address other than the container's loopback.
        listening = [
            (c.laddr.ip, c.laddr.port)
            for c in psutil.Process(proc.pid).net_connections(kind="tcp")
            if c.status == psutil.CONN_LISTEN
        ]
        assert ("0.0.0.0", port) in listening
        # No token was given, so the server made one, in the volume; the API takes it.
        token = (data / "api-token").read_text().strip()
        async with httpx.AsyncClient(base_url=base, timeout=10) as c:
            assert (await c.get("/api/runs")).status_code == 401
            signed = await c.get("/api/runs", headers={"Authorization": f"Bearer {token}"})
            assert signed.status_code == 200
        assert (data / "pizzabot.db").exists()
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)
    # Everything the server keeps is in the volume: a new container with the same volume
    # finds it, and nothing was left in the container's own home.
    assert list(home.iterdir()) == []
    # With the server gone the same check fails, so the container would be marked unhealthy.
    gone = subprocess.run(health, env=env, timeout=30, capture_output=True)
    assert gone.returncode != 0


def compose() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((DOCKER / "compose.yaml").read_text())
    return data


def test_compose_runs_postgres_an_api_server_and_two_workers() -> None:
    services = compose()["services"]
    pg, server, worker = services["postgres"], services["server"], services["worker"]
    assert pg["image"] == "postgres:16"
    assert "pg_isready" in " ".join(pg["healthcheck"]["test"])
    assert "ports" not in pg  # only the app reaches the database

    assert server["command"] == ["pizzabot", "serve", "--no-worker"]
    assert worker["command"] == ["pizzabot", "worker"]
    assert worker["deploy"]["replicas"] == 2
    assert worker["healthcheck"] == {"disable": True}  # no HTTP in a worker
    # The API is published on the host's loopback only (local-first).
    assert [p for p in server["ports"] if not p.startswith("127.0.0.1:")] == []
    assert any(v.endswith(":/data") for v in server["volumes"])
    for app in (server, worker):
        assert app["depends_on"]["postgres"] == {"condition": "service_healthy"}
        assert (DOCKER / app["build"]["context"] / app["build"]["dockerfile"]).is_file()
        env = app["environment"]
        assert env["PIZZABOT_DATABASE_URL"].startswith("postgresql+asyncpg://")
        assert "@postgres:5432/" in env["PIZZABOT_DATABASE_URL"]
        # The token comes from docker/.env or the environment, never from this file.
        assert env["PIZZABOT_API_TOKEN"].startswith("${PIZZABOT_API_TOKEN:?")


def _compose_cli() -> bool:
    try:
        found = subprocess.run(["docker", "compose", "version"], capture_output=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return found.returncode == 0


@pytest.mark.skipif(not _compose_cli(), reason="the docker compose plugin is not installed")
def test_docker_compose_accepts_the_file_and_requires_a_token() -> None:
    base = ["docker", "compose", "-f", str(DOCKER / "compose.yaml"), "config", "--quiet"]
    env = {k: v for k, v in os.environ.items() if k != "PIZZABOT_API_TOKEN"}
    ok = subprocess.run(base, env={**env, "PIZZABOT_API_TOKEN": "t"}, capture_output=True)
    assert ok.returncode == 0, ok.stderr
    missing = subprocess.run(base, env=env, capture_output=True, cwd="/")
    assert missing.returncode != 0
