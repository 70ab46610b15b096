"""What a request may carry: numbers JSON has, and a schema a value can be checked against.

Python's `json` reads `NaN` and `Infinity`, and turns `1e500000` into infinity: such a
request used to be judged by the rules, stored and shown as null. A schema with a `$ref`
cycle, or nested 300 levels deep, made the server answer 500. Each story here sends such a
body to a real server — `POST /api/requests`, a decision, the MCP tool `request_approval` —
and expects a 422 (or a tool error) naming the field and the problem, nothing filed, and the
server answering the next request as before.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import pytest_asyncio

from tests.peers.server import TOKEN, ServerProcess

pytestmark = pytest.mark.asyncio(loop_scope="module")

SKILL = """\
name: inbox
description: requests from agents Pizza Bot does not run
tools:
  "*": ask
"""

NOT_FINITE = ["NaN", "Infinity", "-Infinity", "1e500000", "-1e400", "7" * 200]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def server(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[ServerProcess]:
    root = tmp_path_factory.mktemp("request-shapes")
    skills = root / "skills"
    skills.mkdir()
    (skills / "inbox.yaml").write_text(SKILL)
    proc = ServerProcess(
        data_dir=root / "data", skills_dir=skills, env={"PIZZABOT_MCP_SKILL": "inbox"}
    )
    await proc.start()
    try:
        yield proc
    finally:
        proc.stop()


async def post_raw(server: ServerProcess, path: str, body: str) -> httpx.Response:
    """POST a body as typed: JSON that no client library would write."""
    async with server.client() as c:
        return await c.post(
            path, content=body.encode(), headers={"Content-Type": "application/json"}
        )


def request_body(args: str, schema: str | None = None) -> str:
    extra = f', "schema": {schema}' if schema is not None else ""
    return f'{{"skill": "inbox", "title": "refund", "tool": "pay.refund", "args": {args}{extra}}}'


async def requests_made(server: ServerProcess) -> int:
    async with server.client() as c:
        items = (await c.get("/api/inbox", params={"all": "true"})).json()["items"]
    return len([i for i in items if i["tool"] == "pay.refund"])


async def still_answers(server: ServerProcess) -> None:
    async with server.client() as c:
        r = await c.post(
            "/api/requests",
            json={"skill": "inbox", "title": "fine", "tool": "pay.ok", "args": {"amount": 1.5}},
        )
    assert r.status_code == 201, r.text


@pytest.mark.parametrize("number", NOT_FINITE)
async def test_a_number_json_does_not_have_in_request_args_is_a_422_naming_it(
    server: ServerProcess, number: str
) -> None:
    before = await requests_made(server)

    r = await post_raw(
        server, "/api/requests", request_body(f'{{"amount": {number}, "lines": [1, {number}]}}')
    )

    assert r.status_code == 422, r.text
    errors = r.json()["detail"]["errors"]
    assert set(errors) == {"args.amount", "args.lines[1]"}, errors
    assert all(m.startswith("is out of range") for m in errors.values()), errors
    assert await requests_made(server) == before
    await still_answers(server)


async def test_a_number_json_does_not_have_in_a_request_schema_is_a_422_too(
    server: ServerProcess,
) -> None:
    schema = '{"type": "object", "properties": {"amount": {"type": "number", "maximum": Infinity}}}'

    r = await post_raw(server, "/api/requests", request_body('{"amount": 1}', schema))

    assert r.status_code == 422, r.text
    assert "schema.properties.amount.maximum" in r.json()["detail"]["errors"], r.text


def cycle() -> dict[str, Any]:
    return {
        "type": "object",
        "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"allOf": [{"$ref": "#/$defs/a"}]}},
        "properties": {"amount": {"$ref": "#/$defs/a"}},
    }


def deep(levels: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "number"}
    for _ in range(levels):
        schema = {"type": "object", "properties": {"a": schema}}
    return schema


@pytest.mark.parametrize(
    ("schema", "said"),
    [
        ({"type": "object", "$ref": "#"}, "a $ref cycle at /: $ref '#' leads back to it"),
        (cycle(), "a $ref cycle at /$defs/"),
        (deep(300), "nested deeper than 64 levels (at /properties/a/properties/a/"),
    ],
    ids=["self", "two-step", "300-deep"],
)
async def test_a_schema_no_value_can_be_checked_against_is_a_422_saying_where(
    server: ServerProcess, schema: dict[str, Any], said: str
) -> None:
    before = await requests_made(server)

    r = await post_raw(server, "/api/requests", request_body('{"amount": 1}', json.dumps(schema)))

    assert r.status_code == 422, r.text
    assert said in r.json()["detail"]["errors"]["schema"], r.text
    assert await requests_made(server) == before
    await still_answers(server)


async def test_a_schema_that_recurses_through_its_properties_is_fine(
    server: ServerProcess,
) -> None:
    tree = {
        "type": "object",
        "$defs": {
            "node": {
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}},
                },
            }
        },
        "properties": {"root": {"$ref": "#/$defs/node"}},
    }
    args = {"root": {"name": "a", "kids": [{"name": "b", "kids": []}]}}
    async with server.client() as c:
        r = await c.post(
            "/api/requests",
            json={
                "skill": "inbox",
                "title": "tree",
                "tool": "pay.tree",
                "args": args,
                "schema": tree,
            },
        )
    assert r.status_code == 201, r.text

    nested: Any = {"name": "leaf", "kids": []}
    for _ in range(100):
        nested = {"name": "n", "kids": [nested]}
    async with server.client() as c:
        r = await c.post(
            "/api/requests",
            json={
                "skill": "inbox",
                "title": "tall tree",
                "tool": "pay.tree",
                "args": {"root": nested},
                "schema": tree,
            },
        )
    assert r.status_code == 422, r.text
    assert "nested deeper than 64 levels" in r.json()["detail"]["errors"]["args.root"]


async def pending_item(server: ServerProcess, title: str) -> dict[str, Any]:
    async with server.client() as c:
        r = await c.post(
            "/api/requests",
            json={"skill": "inbox", "title": title, "tool": "pay.refund", "args": {"amount": 5}},
        )
        assert r.status_code == 201, r.text
        item: dict[str, Any] = (await c.get(f"/api/items/{r.json()['item_id']}")).json()
    return item


@pytest.mark.parametrize("number", ["NaN", "Infinity", "1e500000"])
async def test_a_decision_with_a_number_json_does_not_have_is_a_422_and_decides_nothing(
    server: ServerProcess, number: str
) -> None:
    item = await pending_item(server, f"decide {number}")
    path = f"/api/items/{item['id']}/decision"

    for body in (
        f'{{"decision": "edit", "args": {{"amount": {number}}}}}',
        f'{{"decision": "approve", "args": {{"amount": {number}}}}}',
    ):
        r = await post_raw(server, path, body)
        assert r.status_code == 422, (body, r.text)
        assert r.json()["detail"]["errors"]["args.amount"].startswith("is out of range"), r.text

    async with server.client() as c:
        assert (await c.get(f"/api/items/{item['id']}")).json()["status"] == "pending"
        edited = await c.post(path, json={"decision": "edit", "args": {"amount": 7}})
    assert edited.status_code == 200 and edited.json()["final_args"] == {"amount": 7}


async def call_mcp_tool(server: ServerProcess, arguments: str) -> dict[str, Any]:
    """One JSON-RPC `tools/call` to `/mcp`, written by hand: an MCP client library would not
    write NaN. The endpoint is stateless, so the call needs no session."""
    body = (
        '{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": '
        f'{{"name": "request_approval", "arguments": {arguments}}}}}'
    )
    headers = {
        "Authorization": f"Bearer {TOKEN}",
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2025-06-18",
    }
    async with httpx.AsyncClient(base_url=server.url, timeout=20) as c:
        r = await c.post("/mcp", content=body.encode(), headers=headers)
    assert r.status_code == 200, r.text
    data = next(line[5:] for line in r.text.splitlines() if line.startswith("data:"))
    answer: dict[str, Any] = json.loads(data)
    return answer


@pytest.mark.parametrize("number", ["NaN", "Infinity", "-Infinity"])
async def test_the_mcp_tool_refuses_a_number_json_does_not_have_before_filing(
    server: ServerProcess, number: str
) -> None:
    before = await requests_made(server)

    answer = await call_mcp_tool(
        server,
        f'{{"title": "refund {number}", "tool": "pay.refund", "args": {{"amount": {number}}}}}',
    )

    result = answer["result"]
    assert result["isError"] is True, answer
    text = result["content"][0]["text"]
    assert "args.amount: is out of range: must be a finite number" in text, answer
    assert await requests_made(server) == before
