"""The container files. No Docker engine runs here, so what needs none is checked: the image's
command starts a server that answers /healthz (and the image's HEALTHCHECK sees it) when run
with the environment the Dockerfile sets, the dependencies the image installs are the locked
ones, and the compose file wires PostgreSQL, one API server and two workers together."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest
import yaml

from tests.peers.server import free_port

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


def test_the_image_is_slim_python_running_as_a_user_with_data_in_a_volume() -> None:
    assert args_of("FROM") == ["python:3.11-slim"]
    (user,) = args_of("USER")
    assert user not in {"root", "0"}
    last_run = max(i for i, (word, _) in enumerate(instructions()) if word == "RUN")
    assert [word for word, _ in instructions()].index("USER") > last_run, "RUN after USER"
    env = image_env()
    assert env["PIZZABOT_DATA_DIR"] == "/data"
    assert "/data" in json.loads(args_of("VOLUME")[0])
    # Published ports reach only an address other than the container's loopback.
    assert env["PIZZABOT_HOST"] == "0.0.0.0"
    assert "PYTHONDONTWRITEBYTECODE" not in env
    assert exec_form(args_of("CMD")[0])[0] == "pizzabot"
    assert "urllib" in " ".join(healthcheck_command())
    assert "/healthz" in " ".join(healthcheck_command())


def test_the_image_installs_the_servers_dependencies_as_locked() -> None:
    runs = " ".join(args_of("RUN"))
    assert "pip install" in runs and "-c /tmp/src/requirements.lock" in runs
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    lock = {
        name.lower(): version
        for name, version in re.findall(
            r"^([A-Za-z0-9_.-]+)==(\S+)", (ROOT / "requirements.lock").read_text(), re.M
        )
    }
    for dep in deps:
        # `pip -c` refuses a pin the lock contradicts, so the image build would fail on drift.
        name, _, version = re.sub(r"\[.*\]", "", dep).partition("==")
        assert lock.get(name.lower().replace("_", "-")) == version, dep


def test_the_build_context_leaves_the_virtualenv_out() -> None:
    ignored = (DOCKER / "Dockerfile.dockerignore").read_text().split()
    assert {".venv", ".git"} <= set(ignored)


def _wait_ok(url: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert proc.poll() is None, log.read_text(errors="replace")[-3000:]
        try:
            if httpx.get(url, timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"no answer from {url}:\n{log.read_text(errors='replace')[-3000:]}")


def test_the_image_command_serves_healthz_outside_a_container(tmp_path: Path) -> None:
    port = free_port()
    data = tmp_path / "data"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIZZABOT_")}
    for key, value in image_env().items():
        # The image's paths, moved to where this checkout has them.
        env[key] = value.replace("/data", str(data)).replace("/app/", f"{ROOT}/")
    env["PIZZABOT_PORT"] = str(port)
    env["PIZZABOT_API_TOKEN"] = "docker-test-token"
    # `pizzabot` as the image has it: the console script on the PATH.
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    command = exec_form(args_of("CMD")[0])
    assert shutil.which(command[0], path=env["PATH"]) is not None
    health = healthcheck_command()
    log = tmp_path / "serve.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            command, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        _wait_ok(f"http://127.0.0.1:{port}/healthz", proc, log)
        assert subprocess.run(health, env=env, timeout=30).returncode == 0
        _wait_ok(f"http://127.0.0.1:{port}/readyz", proc, log)  # the app is built and started
        listening = [
            c.laddr
            for c in psutil.Process(proc.pid).net_connections(kind="tcp")
            if c.status == psutil.CONN_LISTEN
        ]
        assert ("0.0.0.0", port) in [(a.ip, a.port) for a in listening]
        assert (data / "pizzabot.db").exists()
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)
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
