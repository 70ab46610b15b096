"""The engine's stories, end to end: a real server process, a scripted model reached through
litellm over HTTP, and the test MCP server over stdio (or HTTP)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pizzabot.agent.testing.scripts import last_tool_result
from tests.peers.stack import Reply, Stack, ToolCall, turns
from tests.peers.stories import EMAIL, send_then_summarise
from tests.waiting import eventually


def sent_args(stack: Stack) -> list[dict[str, Any]]:
    """What send_email really ran with (the fields the tests propose; the tool adds defaults)."""
    return [
        {k: v for k, v in c["args"].items() if k in EMAIL}
        for c in stack.tool_calls()
        if c["tool"] == "send_email"
    ]


async def test_approve_runs_the_tool_and_lands_in_unread(tmp_path: Path) -> None:
    async with Stack(tmp_path, script=send_then_summarise) as st:
        run = await st.start_run("test", "send Ann the quote")
        item = await st.wait_item(run["id"])
        assert item["tool"] == "crm.send_email" and item["server"] == "crm"
        assert item["args"] == EMAIL
        assert item["schema"]["properties"]["priority"]["enum"] == ["low", "normal", "high"]
        assert item["risk"] == {
            "impact": "high",
            "reversible": False,
            "scope": "external",
            "grants": ["run", "1h", "exact"],  # the tool's default grants, next to Approve
        }
        assert (await st.get_run(run["id"]))["status"] == "waiting"
        assert sent_args(st) == []  # nothing runs before a human says so

        r = await st.decide(item["id"], "approve")
        assert r.status_code == 200 and r.json()["status"] == "approved"
        done = await st.wait_run(run["id"], {"done"})
        assert sent_args(st) == [EMAIL]
        assert "sent to ann@example.com" in done["result"]
        unread = await st.wait_item(run["id"], box="unread")
        assert unread["title"] == "test finished" and "sent to ann@example.com" in unread["body"]
        kinds = [e["kind"] for e in done["events"]]
        assert (
            kinds.count("model_call") == 2 and "decision" in kinds and kinds[-1] == "run_finished"
        )
        model_call = next(e for e in done["events"] if e["kind"] == "model_call")
        assert model_call["data"]["tokens_in"] > 0 and model_call["data"]["latency_ms"] > 0
        result = next(e for e in done["events"] if e["kind"] == "tool_result")
        assert result["data"]["args"] == EMAIL and result["data"]["duration_ms"] > 0

        async with st.client() as c:
            read = await c.post(f"/api/items/{unread['id']}/read")
            assert read.json()["status"] == "read"
            assert (await c.get("/api/inbox", params={"box": "unread"})).json()["items"] == []


async def test_edit_then_approve_resumes_with_new_args(tmp_path: Path) -> None:
    async with Stack(tmp_path, script=send_then_summarise) as st:
        run = await st.start_run()
        item = await st.wait_item(run["id"])
        bad = await st.decide(
            item["id"], "edit", args={**EMAIL, "copies": 50, "priority": "urgent"}
        )
        assert bad.status_code == 422
        errors = bad.json()["detail"]["errors"]
        assert set(errors) == {"copies", "priority"}
        edited = {**EMAIL, "copies": 3, "priority": "high"}
        r = await st.decide(item["id"], "edit", args=edited)
        assert r.status_code == 200 and r.json()["final_args"] == edited
        await st.wait_run(run["id"], {"done"})
        assert sent_args(st) == [edited]
        # The model sees the edited call as the call that was made, so it does not retry the original.
        last_request = st.model.requests[-1]
        calls = [tc for m in last_request["messages"] for tc in m.get("tool_calls") or []]
        assert [json.loads(c["function"]["arguments"]) for c in calls] == [edited]


async def test_reject_with_a_reason_the_model_then_quotes(tmp_path: Path) -> None:
    async with Stack(tmp_path, script=send_then_summarise) as st:
        run = await st.start_run()
        item = await st.wait_item(run["id"])
        r = await st.decide(item["id"], "reject", reason="Ann is on holiday until Monday")
        assert r.json()["status"] == "rejected"
        done = await st.wait_run(run["id"], {"done"})
        assert sent_args(st) == []
        assert "Ann is on holiday until Monday" in done["result"]


async def test_deny_policy_tells_the_model_and_runs_nothing(tmp_path: Path) -> None:
    skill = {"tools": {"crm.send_email": "deny"}}
    async with Stack(tmp_path, script=send_then_summarise, skill=skill) as st:
        run = await st.start_run()
        done = await st.wait_run(run["id"], {"done"})
        assert "not allowed" in done["result"]
        assert sent_args(st) == []
        async with st.client() as c:
            assert (await c.get("/api/inbox", params={"box": "action", "all": "true"})).json()[
                "items"
            ] == []


async def test_unknown_tool_defaults_to_ask(tmp_path: Path) -> None:
    def look_up(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Reply:
        if last_tool_result(messages) is None:
            return Reply(tool_calls=[ToolCall("crm__lookup", {"query": "Ann"})])
        return Reply(text=f"found: {last_tool_result(messages)}")

    skill = {"tools": {"crm.send_email": "ask"}}  # lookup is not listed
    async with Stack(tmp_path, script=look_up, skill=skill) as st:
        run = await st.start_run()
        item = await st.wait_item(run["id"])
        assert item["tool"] == "crm.lookup"
        await st.decide(item["id"], "approve")
        await st.wait_run(run["id"], {"done"})


async def test_the_second_decision_gets_409_with_who_decided_first(tmp_path: Path) -> None:
    async with Stack(tmp_path, script=send_then_summarise) as st:
        run = await st.start_run()
        item = await st.wait_item(run["id"])
        assert (await st.decide(item["id"], "reject", reason="no")).status_code == 200
        second = await st.decide(item["id"], "approve")
        assert second.status_code == 409
        detail = second.json()["detail"]
        assert detail["decided_by"] == "owner" and detail["decided_via"] == "api"
        assert detail["status"] == "rejected" and detail["decided_at"]
        await st.wait_run(run["id"], {"done"})
        assert sent_args(st) == []


async def test_sigkill_while_waiting_then_restart_decide_and_finish(tmp_path: Path) -> None:
    async with Stack(tmp_path, script=send_then_summarise) as st:
        run = await st.start_run()
        item = await st.wait_item(run["id"])
        st.server.kill()
        await st.server.start()
        assert (await st.get_run(run["id"]))["status"] == "waiting"
        r = await st.decide(item["id"], "approve")
        assert r.status_code == 200
        done = await st.wait_run(run["id"], {"done"})
        assert sent_args(st) == [EMAIL]
        assert "sent to" in done["result"]


def slow_then_done(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Reply:
    result = last_tool_result(messages)
    if result is None:
        return Reply(tool_calls=[ToolCall("crm__slow", {"seconds": 60})])
    return Reply(text=f"the slow tool said: {result}")


async def _wait_started(st: Stack) -> None:
    # Generous: a fresh server's first run waits for litellm's import and the MCP server.
    await eventually(
        lambda: any(c["tool"] == "slow" and c["event"] == "started" for c in st.tool_calls()),
        what="the slow tool to start",
        timeout=60,
        context=st.server.log,
    )


def _stopped_or_gone(pid: int) -> bool:
    """The process cannot run any more: gone, a zombie, or stopped with SIGKILL on its way."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except FileNotFoundError:
        return True
    return stat[stat.rindex(b")") + 2 :].split()[0] in {b"Z", b"X", b"T", b"t"}


async def test_sigkill_while_an_auto_tool_runs_is_not_silently_repeated(tmp_path: Path) -> None:
    async with Stack(tmp_path, script=slow_then_done) as st:
        run = await st.start_run()
        await _wait_started(st)
        tool_server = next(c["pid"] for c in st.tool_calls() if c["tool"] == "slow")
        st.server.kill()
        # The stdio MCP server runs in a session of its own; the crash takes it down at once
        # too, so the call in flight cannot finish after the crash.
        assert _stopped_or_gone(tool_server)
        await st.server.start()
        done = await st.wait_run(run["id"], {"done"})
        starts = [c for c in st.tool_calls() if c["tool"] == "slow" and c["event"] == "started"]
        assert len(starts) == 1
        assert "outcome is unknown" in done["result"]


async def test_sigkill_while_an_idempotent_tool_runs_reruns_it(tmp_path: Path) -> None:
    def slow_short(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Reply:
        result = last_tool_result(messages)
        if result is None:
            return Reply(tool_calls=[ToolCall("crm__slow", {"seconds": 3})])
        return Reply(text=f"the slow tool said: {result}")

    skill = {"tools": {"crm.slow": {"policy": "auto", "idempotent": True}}}
    async with Stack(tmp_path, script=slow_short, skill=skill) as st:
        run = await st.start_run()
        await _wait_started(st)
        st.server.kill()
        await st.server.start()
        done = await st.wait_run(run["id"], {"done"})
        starts = [c for c in st.tool_calls() if c["tool"] == "slow" and c["event"] == "started"]
        assert len(starts) == 2
        assert "outcome is unknown" not in done["result"]


async def test_an_approved_call_interrupted_by_a_crash_is_asked_again(tmp_path: Path) -> None:
    def slow_ask(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Reply:
        if last_tool_result(messages) is None:
            return Reply(tool_calls=[ToolCall("crm__slow", {"seconds": 60})])
        return Reply(text="ok")

    skill = {"tools": {"crm.slow": "ask"}}
    async with Stack(tmp_path, script=slow_ask, skill=skill) as st:
        run = await st.start_run()
        item = await st.wait_item(run["id"])
        await st.decide(item["id"], "approve")
        await _wait_started(st)
        st.server.kill()
        await st.server.start()
        again = await st.wait_item(run["id"], status="pending")
        assert again["id"] != item["id"] and "Asked again" in again["body"]
        starts = [c for c in st.tool_calls() if c["tool"] == "slow" and c["event"] == "started"]
        assert len(starts) == 1
        await st.decide(again["id"], "reject", reason="not now")
        await st.wait_run(run["id"], {"done"})


async def test_the_ollama_route_and_an_http_mcp_server(tmp_path: Path) -> None:
    async with Stack(tmp_path, script=send_then_summarise, mcp="http") as st:
        st.write_skill(
            {
                "name": "local",
                "model": "ollama_chat/scripted",
                "model_options": {"api_base": st.model.ollama_base},
            }
        )
        st.server.stop()
        await st.server.start()
        run = await st.start_run("local")
        item = await st.wait_item(run["id"])
        await st.decide(item["id"], "approve")
        done = await st.wait_run(run["id"], {"done"})
        assert "sent to ann@example.com" in done["result"]
        assert any(r.get("model") == "scripted" and "messages" in r for r in st.model.requests)


async def test_a_provider_outage_is_retried_then_fails_with_a_reason(tmp_path: Path) -> None:
    async with Stack(tmp_path, script=turns(Reply(text="all good"))) as st:
        st.model.fail_next(status=503, times=2)
        run = await st.start_run()
        done = await st.wait_run(run["id"], {"done", "failed"})
        assert done["status"] == "done" and done["events"][1]["data"]["attempts"] == 3

        st.model.fail_next(status=500, times=50)
        run = await st.start_run()
        failed = await st.wait_run(run["id"], {"done", "failed"})
        assert failed["status"] == "failed"
        assert "after 4 attempts" in failed["error"] and "500" in failed["error"]
        unread = await st.wait_item(run["id"], box="unread")
        assert unread["title"] == "test failed" and "500" in unread["body"]


async def test_the_api_needs_the_token_and_speaks_plain_errors(tmp_path: Path) -> None:
    async with Stack(tmp_path, script=send_then_summarise) as st:
        async with st.server.client(token=None) as anon:
            for method, path in [
                ("GET", "/api/runs"),
                ("POST", "/api/runs"),
                ("GET", "/api/inbox"),
                ("POST", "/api/kill"),
                ("GET", "/api/skills"),
            ]:
                assert (await anon.request(method, path)).status_code == 401
            assert (await anon.get("/healthz")).status_code == 200
        async with st.server.client(token="wrong") as wrong:
            assert (await wrong.get("/api/runs")).status_code == 401
        async with st.client() as c:
            assert (await c.get("/api/runs/nope")).status_code == 404
            assert (
                await c.post("/api/runs", json={"skill": "nope", "input": "x"})
            ).status_code == 404
            assert (
                await c.post("/api/items/nope/decision", json={"decision": "approve"})
            ).status_code == 404
            r = await c.post("/api/runs", json={"skill": "test"})
            run_id = r.json()["id"]
            item = await st.wait_item(run_id)
            bad = await c.post(f"/api/items/{item['id']}/decision", json={"decision": "maybe"})
            assert bad.status_code == 422
            cancelled = await c.post(f"/api/runs/{run_id}/cancel")
            assert cancelled.json()["status"] == "cancelled"
            assert (await c.post(f"/api/runs/{run_id}/cancel")).status_code == 409
            closed = (await c.get(f"/api/items/{item['id']}")).json()
            assert closed["status"] == "cancelled"
            schema = (await c.get("/openapi.json")).json()
            assert "/api/items/{item_id}/decision" in schema["paths"]


async def test_a_bad_skill_file_is_refused_with_file_and_line_and_the_others_load(
    tmp_path: Path,
) -> None:
    async with Stack(tmp_path, script=send_then_summarise) as st:
        (st.skills_dir / "broken.yaml").write_text(
            "name: broken\ninstructions: hi\nmodel: m\ntools:\n  crm.x: {policy: sometimes}\n"
        )
        (st.skills_dir / "notyaml.yaml").write_text("name: [unclosed\n")
        st.server.stop()
        await st.server.start()
        async with st.client() as c:
            data = (await c.get("/api/skills")).json()
        assert [s["name"] for s in data["items"]] == ["test"]
        errors = {Path(e["path"]).name: e for e in data["errors"]}
        assert (
            errors["broken.yaml"]["line"] == 5
            and "sometimes" not in errors["broken.yaml"]["message"]
        )
        assert "tools.crm.x" in errors["broken.yaml"]["message"]
        assert errors["notyaml.yaml"]["line"] == 2 and "YAML" in errors["notyaml.yaml"]["message"]


@pytest.mark.parametrize("ignored", [None])
async def test_a_finished_run_takes_a_follow_up_with_its_history(
    tmp_path: Path, ignored: None
) -> None:
    def echo(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Reply:
        users = [m["content"] for m in messages if m["role"] == "user"]
        return Reply(text=" | ".join(users))

    async with Stack(tmp_path, script=echo) as st:
        run = await st.start_run("test", "first")
        await st.wait_run(run["id"], {"done"})
        async with st.client() as c:
            r = await c.post(f"/api/runs/{run['id']}/messages", json={"text": "second"})
            assert r.status_code == 200
        await st.wait_item(run["id"], box="unread", count=2)
        done = await st.wait_run(run["id"], {"done"})
        assert done["result"] == "first | second"
