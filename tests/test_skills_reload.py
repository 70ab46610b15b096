"""Fixing a skill file needs no restart: a real `pizzabot serve` loads a changed file by itself
(or on `pizzabot skills --reload`), keeps a skill's last good version when its file breaks,
lets runs in flight finish with the version they started with, writes the reload to the audit
trail, and brings the skill's schedules along. A run of a refused skill says where and why."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pizzabot.agent.testing.scripts import last_tool_result, last_user_text, message_text
from tests.peers.server import BYTECODE, TOKEN
from tests.peers.stack import Reply, Stack, ToolCall
from tests.waiting import eventually

EMAIL = {"to": "ann@example.com", "subject": "Quote", "body": "Hi.", "priority": "normal"}
WATCHED = {"PIZZABOT_SKILLS_WATCH": "0.5"}
ON_REQUEST = {"PIZZABOT_SKILLS_WATCH": "0"}


def echo_instructions(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Reply:
    """Ask to send a mail when told "ask first"; otherwise answer with the instructions the
    model was given, so a run's result shows which version of its skill it ran with."""
    system = next(message_text(m) for m in messages if m.get("role") == "system")
    if "ask first" in (last_user_text(messages) or "") and last_tool_result(messages) is None:
        return Reply(tool_calls=[ToolCall("crm__send_email", dict(EMAIL))])
    return Reply(text=f"ran with: {system}")


@dataclass(frozen=True)
class Done:
    code: int
    out: str
    err: str


def cli(st: Stack, *args: str) -> Done:
    env = {
        **os.environ,
        "PIZZABOT_URL": st.server.url,
        "PIZZABOT_API_TOKEN": TOKEN,
        "COLUMNS": "200",
        "PYTHONDONTWRITEBYTECODE": "",
        "PYTHONPYCACHEPREFIX": str(BYTECODE),
    }
    done = subprocess.run(
        [sys.executable, "-m", "pizzabot.bot.main", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return Done(done.returncode, done.stdout, done.stderr)


async def acli(st: Stack, *args: str) -> Done:
    return await asyncio.to_thread(cli, st, *args)


async def skills(st: Stack) -> dict[str, Any]:
    async with st.client() as c:
        r = await c.get("/api/skills")
        assert r.status_code == 200, r.text
        data: dict[str, Any] = r.json()
        return data


async def until(st: Stack, check: Any, what: str, timeout: float = 30.0) -> Any:
    """Poll the server until `check(await skills(st))` is truthy."""

    async def seen() -> Any:
        return check(await skills(st))

    return await eventually(seen, what=what, timeout=timeout, context=st.server.log)


async def audit(st: Stack, action: str) -> list[dict[str, Any]]:
    async with st.client() as c:
        items = (await c.get("/api/audit")).json()["items"]
    return [e for e in items if e["action"] == action]


async def test_a_changed_file_is_loaded_and_runs_in_flight_keep_their_version(
    tmp_path: Path,
) -> None:
    async with Stack(tmp_path, script=echo_instructions, env=WATCHED) as st:
        first = await st.start_run("test", "ask first")
        item = await st.wait_item(first["id"])

        st.write_skill({"instructions": "You are version two.", "description": "v2"})
        await until(st, lambda s: s["items"][0]["description"] == "v2", "the new version")

        second = await st.start_run("test", "just answer")
        assert (await st.wait_run(second["id"], {"done"}))["result"] == (
            "ran with: You are version two."
        )
        assert (await st.decide(item["id"], "approve")).status_code == 200
        assert (await st.wait_run(first["id"], {"done"}))["result"] == (
            "ran with: You are a test agent."
        )

        [reload] = await audit(st, "skills_reloaded")
        assert (reload["actor"], reload["channel"]) == ("server", "watch")
        assert reload["detail"]["changed"] == ["test"] and reload["detail"]["refused"] == []
        assert "skills reloaded from" in st.server.log() and "changed test" in st.server.log()


async def test_a_broken_edit_keeps_the_last_good_version_running(tmp_path: Path) -> None:
    async with Stack(tmp_path, script=echo_instructions, env=WATCHED) as st:
        path = st.skills_dir / "test.yaml"
        text = path.read_text()
        path.write_text(text.replace("instructions:", "instructons:"))
        [refusal] = await until(st, lambda s: s["errors"], "the refusal")
        line = text.splitlines().index(
            next(x for x in text.splitlines() if x.startswith("instructions:"))
        )
        assert refusal == {
            "path": str(path),
            "line": line + 1,
            "message": "unknown key `instructons`: did you mean `instructions`? "
            "(`instructions` is required)",
            "name": "test",
            "problems": [{"line": line + 1, "message": refusal["message"]}],
            "kept": "test",
        }
        assert [s["name"] for s in (await skills(st))["items"]] == ["test"]

        run = await st.start_run("test", "just answer")
        assert (await st.wait_run(run["id"], {"done"}))["result"] == (
            "ran with: You are a test agent."
        )
        shown = await acli(st, "skills")
        assert shown.code == 0 and "test" in shown.out
        assert (
            f"refused: {path}:{line + 1}: unknown key `instructons`: did you mean `instructions`?"
            in shown.err
        )
        assert "skill test keeps running its last good version until the file is fixed" in (
            shown.err
        )
        assert "keeps its last good version" in st.server.log()


async def test_a_refused_skill_says_where_and_why_and_reload_on_request(tmp_path: Path) -> None:
    async with Stack(tmp_path, script=echo_instructions, env=ON_REQUEST) as st:
        other = st.skills_dir / "other.yaml"
        other.write_text("name: other\ninstructions: hi\nmodle: openai/scripted\n")
        reloaded = await acli(st, "skills", "--reload")
        assert reloaded.code == 0 and "reloaded: no skill changed" in reloaded.out
        assert (
            f"refused: {other}:3: unknown key `modle`: did you mean `model`? (`model` is required)"
            in reloaded.err
        )

        async with st.client() as c:
            r = await c.post("/api/runs", json={"skill": "other", "input": "hi"})
        assert r.status_code == 404
        assert r.json()["detail"] == (
            f"skill 'other' was refused: {other}:3: unknown key `modle`: did you mean `model`? "
            "(`model` is required)"
        )
        ran = await acli(st, "run", "other", "hi")
        assert ran.code == 1 and ran.out == ""
        assert ran.err.strip() == (
            f"error: skill 'other' was refused when the server loaded {other} (line 3): unknown "
            "key `modle`: did you mean `model`? (`model` is required). Fix the file, then "
            "run `pizzabot skills --reload`."
        )

        other.write_text(st.skills_dir.joinpath("test.yaml").read_text().replace("test", "other"))
        reloaded = await acli(st, "skills", "--reload")
        assert reloaded.code == 0 and "reloaded: added other" in reloaded.out
        assert "refused" not in reloaded.err
        assert (await acli(st, "run", "other", "hi")).code == 0

        entries = await audit(st, "skills_reloaded")
        assert [(e["actor"], e["channel"], e["detail"]["added"]) for e in entries] == [
            ("owner", "api", ["other"]),
            ("owner", "api", []),
        ]


async def test_skill_schedules_follow_a_reload(tmp_path: Path) -> None:
    async def schedules(st: Stack) -> list[dict[str, Any]]:
        async with st.client() as c:
            items: list[dict[str, Any]] = (await c.get("/api/schedules")).json()["items"]
            return items

    async with Stack(tmp_path, script=echo_instructions, env=ON_REQUEST) as st:
        assert await schedules(st) == []
        st.write_skill({"schedules": [{"every": "1h", "input": "tick"}]})
        assert (await acli(st, "skills", "--reload")).code == 0
        [schedule] = await schedules(st)
        assert (schedule["skill"], schedule["source"], schedule["every_seconds"]) == (
            "test",
            "skill",
            3600,
        )
        st.write_skill({})
        assert "changed test" in (await acli(st, "skills", "--reload")).out
        assert await schedules(st) == []
