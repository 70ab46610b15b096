"""`pizzabot ask` from a shell, and the shell example built on it, against a real server:
the request is decided on the web page or through the API while the command waits, and the
exit code and the JSON it prints say what was decided."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio
import yaml

from pizzabot.agent.skills import load_skills
from tests.peers.server import TOKEN, ServerProcess, free_port
from tests.peers.web import csrf_of
from tests.waiting import eventually

pytestmark = pytest.mark.asyncio(loop_scope="module")

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "manifests" / "examples" / "agents"
SKILL = {
    "name": "agents",
    "description": "requests from shell scripts and hooks",
    "tools": {"send_email": {"policy": "ask"}, "Bash": {"policy": "ask"}},
}
EMAIL = {"to": "ann@example.com", "subject": "Quote", "body": "Here is the quote."}


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def server(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[ServerProcess]:
    root = tmp_path_factory.mktemp("ask")
    skills = root / "skills"
    skills.mkdir()
    (skills / "agents.yaml").write_text(yaml.safe_dump(SKILL))
    proc = ServerProcess(
        data_dir=root / "data",
        skills_dir=skills,
        env={"PIZZABOT_TIMERS_INTERVAL": "0.2", "PIZZABOT_POLL_INTERVAL": "0.2"},
    )
    await proc.start()
    try:
        yield proc
    finally:
        proc.stop()


def shell_env(server: ServerProcess, **more: str) -> dict[str, str]:
    bin_dir = str(Path(sys.executable).parent)  # where `pizzabot` is installed
    return {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        "PIZZABOT_URL": server.url,
        "PIZZABOT_API_TOKEN": TOKEN,
        "PIZZABOT_DATA_DIR": str(server.data_dir / "elsewhere"),
        **more,
    }


class Shell:
    """A command started from a shell, its output read when it ends."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc

    async def done(self) -> tuple[int, Any, str]:
        out, err = await asyncio.wait_for(self.proc.communicate(), 60)
        text = out.decode()
        assert self.proc.returncode is not None
        return self.proc.returncode, json.loads(text) if text.strip() else None, err.decode()


async def run(server: ServerProcess, *argv: str, stdin: bytes | None = None, **env: str) -> Shell:
    proc = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=shell_env(server, **env),
    )
    assert proc.stdin is not None
    if stdin is not None:
        proc.stdin.write(stdin)
    proc.stdin.close()
    return Shell(proc)


async def ask(server: ServerProcess, title: str, *more: str, **env: str) -> Shell:
    args = json.dumps({**EMAIL, "subject": title})
    return await run(
        server,
        "pizzabot",
        "ask",
        "agents",
        "--tool",
        "send_email",
        "--args",
        args,
        "--title",
        title,
        *more,
        **env,
    )


async def pending_item(server: ServerProcess, title: str) -> dict[str, Any]:
    """The Action item the request titled `title` made, once it is there."""
    async with server.client() as c:

        async def find() -> dict[str, Any] | None:
            items = (await c.get("/api/inbox", params={"box": "action"})).json()["items"]
            return next((i for i in items if i["title"] == title), None)

        return await eventually(find, what=f"the item {title!r}", context=server.log)


async def decide(server: ServerProcess, item_id: str, **body: Any) -> None:
    async with server.client() as c:
        r = await c.post(f"/api/items/{item_id}/decision", json=body)
        assert r.status_code == 200, r.text


async def test_waits_and_exits_0_when_approved_on_the_web(server: ServerProcess) -> None:
    shell = await ask(server, "Mail Ann the quote", "--wait")
    item = await pending_item(server, "Mail Ann the quote")
    assert item["tool"] == "send_email" and item["args"]["to"] == "ann@example.com"
    assert shell.proc.returncode is None  # still waiting for a person
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as web:
        assert (await web.get("/login", params={"token": TOKEN})).status_code == 303
        page = (await web.get(f"/items/{item['id']}")).text
        r = await web.post(
            f"/items/{item['id']}", data={"csrf": csrf_of(page), "decision": "approve"}
        )
        assert r.status_code == 303, r.text
    code, decision, err = await shell.done()
    assert code == 0, err
    assert decision["status"] == "approved" and decision["via"] == "web"
    assert decision["item_id"] == item["id"] and decision["args"]["to"] == "ann@example.com"


async def test_an_edit_exits_0_with_the_new_arguments(server: ServerProcess) -> None:
    shell = await ask(server, "Mail Bob instead", "--wait")
    item = await pending_item(server, "Mail Bob instead")
    await decide(
        server, item["id"], decision="edit", args={**item["args"], "to": "bob@example.com"}
    )
    code, decision, err = await shell.done()
    assert code == 0, err
    assert decision["status"] == "edited" and decision["args"]["to"] == "bob@example.com"


async def test_a_reject_exits_1_with_the_reason(server: ServerProcess) -> None:
    shell = await ask(server, "Mail Cy", "--wait")
    item = await pending_item(server, "Mail Cy")
    await decide(server, item["id"], decision="reject", reason="Cy asked us to wait")
    code, decision, err = await shell.done()
    assert code == 1, err
    assert decision["status"] == "rejected" and decision["reason"] == "Cy asked us to wait"
    assert decision["args"] is None


async def test_no_decision_in_time_exits_1_expired(server: ServerProcess) -> None:
    shell = await ask(server, "Mail Dee", "--wait", "--timeout", "1")
    code, decision, err = await shell.done()
    assert code == 1, err
    assert decision["status"] == "expired"


async def test_without_wait_it_prints_the_pending_request_and_exits_3(
    server: ServerProcess,
) -> None:
    code, decision, err = await (await ask(server, "Mail Eve later")).done()
    assert code == 3, err
    assert decision["status"] == "pending" and decision["kind"] == "approval"
    item = await pending_item(server, "Mail Eve later")
    assert decision["item_id"] == item["id"] and decision["url"].endswith(f"/items/{item['id']}")
    # The same request, asked for later, is answered once decided.
    await decide(server, item["id"], decision="approve")
    async with server.client() as c:
        later = (await c.get(f"/api/requests/{decision['id']}", params={"wait": 5})).json()
    assert later["status"] == "approved"


async def test_errors_are_one_line_and_exit_2(server: ServerProcess) -> None:
    bad_args = await run(server, "pizzabot", "ask", "agents", "--tool", "x", "--args", "[1]")
    code, out, err = await bad_args.done()
    assert (code, out) == (
        2,
        None,
    ) and err.strip() == "error: --args must be a JSON object ({...})."

    unknown = await run(server, "pizzabot", "ask", "nosuch", "--tool", "x", "--args", "{}")
    code, out, err = await unknown.done()
    assert code == 2 and out is None and len(err.strip().splitlines()) == 1
    # The server's words, as every command prints them: not a Python dict.
    assert err.startswith("error: 422: ") and "skill: " in err and "{'" not in err

    wrong = await ask(server, "Mail with a wrong token", PIZZABOT_API_TOKEN="wrong")
    code, out, err = await wrong.done()
    assert code == 2 and "401" in err and "PIZZABOT_API_TOKEN" in err

    down = await ask(server, "Mail nobody", PIZZABOT_URL=f"http://127.0.0.1:{free_port()}")
    code, out, err = await down.done()
    assert code == 2 and "cannot reach the inbox" in err and "pizzabot serve" in err

    schema = await ask(server, "Mail with a missing schema", "--schema", "/nonexistent.json")
    code, out, err = await schema.done()
    assert code == 2 and "cannot read --schema" in err


async def test_the_shell_example_asks_with_pizzabot_ask_then_with_curl(
    server: ServerProcess, tmp_path: Path
) -> None:
    for tool in ("jq", "curl"):
        if shutil.which(tool) is None:
            pytest.fail(f"the shell example needs {tool} (apt-get install {tool})")
    # The script's own ask token is all it has: the server's token is neither set nor on disk.
    env = {k: v for k, v in shell_env(server).items() if k != "PIZZABOT_API_TOKEN"}
    env |= {
        "PIZZABOT_SKILL": "agents",
        "PIZZABOT_DATA_DIR": str(tmp_path),
        "PIZZABOT_AGENT_TOKEN": await ask_token(server, "quote-script"),
    }
    proc = await asyncio.create_subprocess_exec(
        "bash",
        str(EXAMPLES / "ask.sh"),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        stdin=asyncio.subprocess.DEVNULL,
        env=env,
    )
    shell = Shell(proc)
    first = await pending_item(server, "Mail Ann the quote")
    await decide(
        server, first["id"], decision="edit", args={**first["args"], "to": "ann@example.org"}
    )

    async def second() -> dict[str, Any] | None:
        item = await pending_item(server, "Mail Ann the quote")
        return item if item["id"] != first["id"] else None

    curl_item = await eventually(second, what="the request made with curl")
    await decide(server, curl_item["id"], decision="reject", reason="sent by hand")
    out, err = await asyncio.wait_for(shell.proc.communicate(), 60)
    assert shell.proc.returncode == 0, err.decode()
    text = out.decode()
    assert 'go ahead with: {"to":"ann@example.org"' in text
    assert '"status": "rejected"' in text and '"reason": "sent by hand"' in text


async def ask_token(server: ServerProcess, name: str) -> str:
    async with server.client() as c:
        r = await c.post("/api/tokens", json={"name": name, "scope": "ask"})
    assert r.status_code == 201, r.text
    return str(r.json()["token"])


async def test_the_shell_example_stops_when_pizza_bot_cannot_be_asked(
    server: ServerProcess,
) -> None:
    down = f"http://127.0.0.1:{free_port()}"
    token = await ask_token(server, "unreached-script")
    shell = await run(
        server, "bash", str(EXAMPLES / "ask.sh"), PIZZABOT_URL=down, PIZZABOT_AGENT_TOKEN=token
    )
    out, err = await asyncio.wait_for(shell.proc.communicate(), 60)
    assert shell.proc.returncode == 2 and out == b""  # not "rejected": nothing was decided
    assert "not sent: Pizza Bot could not be asked" in err.decode()


async def test_the_shell_example_will_not_ask_with_the_servers_own_token(
    server: ServerProcess,
) -> None:
    # PIZZABOT_API_TOKEN (the owner's, which could also decide) is set; the script ignores it.
    shell = await run(server, "bash", str(EXAMPLES / "ask.sh"))
    out, err = await asyncio.wait_for(shell.proc.communicate(), 60)
    assert shell.proc.returncode == 2 and out == b""
    assert "pizzabot tokens create my-script --scope ask" in err.decode()


async def test_the_example_skill_loads() -> None:
    report = load_skills(EXAMPLES)
    assert report.errors == [] and set(report.skills) == {"agents"}
    assert report.skills["agents"].model is None  # inbox-only


async def test_a_wait_ends_when_its_timeout_says_not_at_the_next_sweep(
    tmp_path: Path,
) -> None:
    # The clock's loop passes once an hour here: only a timer can end the wait in time.
    skills = tmp_path / "skills"
    skills.mkdir()
    (skills / "agents.yaml").write_text(yaml.safe_dump(SKILL))
    slow = ServerProcess(
        data_dir=tmp_path / "data", skills_dir=skills, env={"PIZZABOT_TIMERS_INTERVAL": "3600"}
    )
    await slow.start()
    try:
        shell = await ask(slow, "Mail Fay", "--wait", "--timeout", "2")
        code, decision, err = await asyncio.wait_for(shell.done(), 60)
    finally:
        slow.stop()
    assert code == 1, err
    assert decision["status"] == "expired" and decision["reason"] == "no one answered within 2s"
