"""Every way a new user makes the CLI fail ends in one line that says what to do, and a
non-zero exit: never a traceback, a Python repr or pydantic's error list.

The CLI runs as a real process (`python -m pizzabot.bot.main`) against a real `pizzabot serve` with the
offline demo skill and one skill file the server refused.
"""

from __future__ import annotations

import asyncio
import http.server
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.peers.server import BYTECODE, TOKEN, ServerProcess, free_port

ROOT = Path(__file__).resolve().parent.parent
BROKEN = "name: broken\nmodel: [oops\n"


@dataclass(frozen=True)
class Done:
    code: int
    out: str
    err: str


@dataclass(frozen=True)
class Cli:
    server: ServerProcess

    def __call__(
        self,
        *args: str,
        env: dict[str, str] | None = None,
        stdin: str | None = None,
        columns: int = 100,
    ) -> Done:
        base = {
            **os.environ,
            "PIZZABOT_URL": self.server.url,
            "PIZZABOT_API_TOKEN": TOKEN,
            "COLUMNS": str(columns),
            "PYTHONDONTWRITEBYTECODE": "",
            "PYTHONPYCACHEPREFIX": str(BYTECODE),
        }
        done = subprocess.run(
            [sys.executable, "-m", "pizzabot.bot.main", *args],
            env={**base, **(env or {})},
            input=stdin if stdin is not None else "",
            capture_output=True,
            text=True,
            timeout=60,
        )
        return Done(done.returncode, done.stdout, done.stderr)

    def api(self, method: str, path: str, **kw: Any) -> Any:
        with httpx.Client(
            base_url=self.server.url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30
        ) as c:
            r = c.request(method, path, **kw)
            r.raise_for_status()
            return r.json()

    def wait_item(self, run_id: str, timeout: float = 60.0) -> dict[str, Any]:
        """The run's pending Action item, once the demo model has asked for it."""

        async def item(c: httpx.AsyncClient) -> dict[str, Any] | None:
            r = await c.get("/api/inbox", params={"box": "action"})
            r.raise_for_status()
            return next((i for i in r.json()["items"] if i["run_id"] == run_id), None)

        found = asyncio.run(
            self.server.wait_for(item, timeout=timeout, what=f"an action item for run {run_id}")
        )
        return dict(found)

    def wait_run(self, run_id: str, states: set[str], timeout: float = 60.0) -> dict[str, Any]:
        async def run(c: httpx.AsyncClient) -> dict[str, Any] | None:
            r = await c.get(f"/api/runs/{run_id}")
            r.raise_for_status()
            body: dict[str, Any] = r.json()
            return body if body["status"] in states else None

        what = f"run {run_id} to reach {sorted(states)}"
        return dict(asyncio.run(self.server.wait_for(run, timeout=timeout, what=what)))


def serve_demo(root: Path) -> ServerProcess:
    skills = root / "skills"
    skills.mkdir()
    shutil.copy(ROOT / "manifests" / "skills" / "demo.yaml", skills / "demo.yaml")
    (skills / "broken.yaml").write_text(BROKEN)
    server = ServerProcess(data_dir=root / "data", skills_dir=skills)
    asyncio.run(server.start())
    return server


@pytest.fixture(scope="module")
def cli(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cli]:
    server = serve_demo(tmp_path_factory.mktemp("cli-errors"))
    try:
        yield Cli(server)
    finally:
        server.stop()


def one_line_error(done: Done, *, code: int | None = None) -> str:
    """The failure's only line on stderr, after checking it is a failure and not a crash."""
    assert done.code != 0, done
    if code is not None:
        assert done.code == code, done
    assert "Traceback" not in done.err + done.out, done.err
    lines = done.err.strip().splitlines()
    assert len(lines) == 1, done.err
    assert lines[0].startswith("error: "), done.err
    return lines[0]


def test_a_server_that_is_down_names_its_url_and_how_to_start_it(cli: Cli) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    line = one_line_error(cli("runs", "--url", url), code=1)
    assert url in line and "connection refused" in line
    assert "pizzabot serve" in line and "--url" in line


def test_a_wrong_token_says_where_the_servers_token_is_kept(cli: Cli) -> None:
    line = one_line_error(cli("inbox", "--token", "nope"), code=1)
    assert line.startswith("error: 401") and "--token" in line
    assert "api-token" in line and "PIZZABOT_API_TOKEN" in line


def test_no_token_at_all_says_how_to_give_one(cli: Cli, tmp_path: Path) -> None:
    done = cli("runs", env={"PIZZABOT_API_TOKEN": "", "PIZZABOT_DATA_DIR": str(tmp_path)})
    line = one_line_error(done, code=2)
    assert "No API token" in line and str(tmp_path / "api-token") in line


def test_a_url_that_is_not_pizza_bot_is_named(cli: Cli) -> None:
    line = one_line_error(cli("runs", "--url", f"{cli.server.url}/static"), code=1)
    assert "404" in line and "is --url a Pizza Bot server?" in line


def test_an_unknown_run_is_a_404_line(cli: Cli) -> None:
    line = one_line_error(cli("show", "no-such-run"), code=1)
    assert line.startswith("error: 404") and "no-such-run" in line


def test_a_run_without_input_is_refused_and_stdin_is_read_when_piped(cli: Cli) -> None:
    before = len(cli.api("GET", "/api/runs")["items"])
    line = one_line_error(cli("run", "demo"), code=2)
    assert "Nothing to do" in line and 'pizzabot run demo "' in line
    assert len(cli.api("GET", "/api/runs")["items"]) == before
    piped = cli("run", "demo", stdin="order the pizzas from stdin\n")
    assert piped.code == 0, piped.err
    run_id = piped.out.split()[1]
    assert cli.api("GET", f"/api/runs/{run_id}")["input"] == "order the pizzas from stdin\n"


def test_a_refused_skill_file_is_named_with_the_reason(cli: Cli) -> None:
    [refusal] = cli.api("GET", "/api/skills")["errors"]
    line = one_line_error(cli("run", "broken", "do it"), code=1)
    assert "refused" in line and f"broken.yaml (line {refusal['line']})" in line
    assert "not valid YAML" in line and "no skill named" not in line
    unknown = one_line_error(cli("run", "nosuch", "do it"), code=1)
    assert "404: no skill named 'nosuch'" in unknown and "pizzabot skills" in unknown


def test_skills_lists_the_refused_file_and_why(cli: Cli) -> None:
    [refusal] = cli.api("GET", "/api/skills")["errors"]
    done = cli("skills")
    assert done.code == 0 and "demo" in done.out
    assert "refused:" in done.err and f"broken.yaml:{refusal['line']}: not valid YAML" in done.err


def test_bad_edits_and_decisions_are_one_line_each(cli: Cli) -> None:
    started = cli("run", "demo", "mail the team about [pizza] friday")
    assert started.code == 0, started.err
    item = cli.wait_item(started.out.split()[1])["id"]

    line = one_line_error(cli("edit", item, "--args", "{bad"), code=2)
    assert "--args is not valid JSON" in line and """--args '{"copies": 3}'""" in line
    line = one_line_error(cli("edit", item, "--args", "[1]"), code=2)
    assert "must be a JSON object" in line and "got list" in line
    line = one_line_error(cli("edit", item), code=2)
    assert "Nothing to change" in line and "--set NAME=VALUE" in line
    line = one_line_error(cli("edit", item, "--set", "copies"), code=2)
    assert "--set takes NAME=VALUE" in line

    # The server's 422s: a field -> message dict, and FastAPI's list of pydantic errors.
    line = one_line_error(cli("edit", item, "--set", "copies=500"), code=1)
    assert line.startswith("error: 422") and "copies" in line and "at most" in line
    line = one_line_error(cli("reject", item, "x" * 5000), code=1)
    assert line.startswith("error: 422") and "reason: String should have at most 4000" in line
    assert "{'type'" not in line and "[{" not in line

    assert cli("approve", item).code == 0
    line = one_line_error(cli("reject", item, "too late"), code=1)
    assert line.startswith("error: 409") and "already approved by owner" in line


def test_a_box_that_does_not_exist_is_a_usage_error_not_a_repr(cli: Cli) -> None:
    done = cli("inbox", "--box", "foo")
    assert done.code == 2 and "Traceback" not in done.err
    assert "'foo' is not one of 'action', 'unread'" in done.err
    assert "{'type'" not in done.err and "literal_error" not in done.err


def test_help_shows_flags_without_a_value_and_whole_defaults() -> None:
    env = {**os.environ, "COLUMNS": "80"}

    def help_of(*args: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "pizzabot.bot.main", *args, "--help"],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    serve = help_of("serve")
    assert "--no-worker" in serve and "--help" in serve and "<bool>" not in serve
    bench = help_of("bench")
    assert "<bool>" not in bench and "…" not in bench
    words = " ".join(bench.replace("│", " ").split())
    assert "(default: user postgres on 127.0.0.1:5432, database postgres)" in words
    for command in ("inbox", "runs", "audit", "skills", "schedules"):
        text = help_of(command)
        assert "--json" in text and "<bool>" not in text, command


class _NotPizzaBot(http.server.BaseHTTPRequestHandler):
    """Answers every request with JSON of another shape, as some other service would."""

    def do_GET(self) -> None:
        body = b'{"hello": "world"}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


def test_an_answer_of_another_shape_is_one_line_not_a_traceback(cli: Cli) -> None:
    other = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _NotPizzaBot)
    thread = threading.Thread(target=other.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{other.server_address[1]}"
        line = one_line_error(cli("runs", "--url", url), code=1)
        assert "unexpected KeyError" in line and "PIZZABOT_DEBUG=1" in line
    finally:
        other.shutdown()
        other.server_close()
    line = one_line_error(cli("runs", "--url", "127.0.0.1:8787"), code=2)
    assert "--url must start with http:// or https://" in line
