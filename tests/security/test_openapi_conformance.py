"""`/openapi.json` says what the server does: schemathesis (every check, with the token,
100 examples per operation) drives a real `pizzabot serve` and finds no server error, no
answer the schema does not document, no body the schema allows refused for its shape and
none it forbids accepted. Web pages and `/slack/events` are not in the schema.

What JSON Schema cannot say is answered 422 to a body the schema allows, and is checked
beyond it: POST /api/schedules' cron expression and time zone; POST /api/requests' skill
(one this server has) and args (valid for that skill's tool); POST /api/away's people (in a
skill's `people:`) and time (ahead, with its zone); DELETE /api/away of someone not away
(404)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
import pytest_asyncio

from tests.peers.server import TOKEN, ServerProcess

SKILLS = Path(__file__).resolve().parents[2] / "manifests" / "skills"
CONFIG = """
[[operations]]
include-path = "/api/schedules"
include-method = "POST"
checks.positive_data_acceptance.expected-statuses = ["2xx", "401", "403", "404", "409", "422"]

[[operations]]
include-path = "/api/away"
include-method = "POST"
checks.positive_data_acceptance.expected-statuses = ["2xx", "401", "403", "404", "422"]

[[operations]]
include-path = "/api/away"
include-method = "DELETE"
checks.positive_data_acceptance.expected-statuses = ["2xx", "401", "403", "404", "422"]
"""

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def server(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[ServerProcess]:
    root: Path = tmp_path_factory.mktemp("openapi")
    proc = ServerProcess(data_dir=root / "data", skills_dir=SKILLS, args=["--no-worker"])
    await proc.start()
    try:
        yield proc
    finally:
        proc.stop()


async def test_every_api_operation_documents_its_errors(server: ServerProcess) -> None:
    async with httpx.AsyncClient(base_url=server.url) as c:
        spec = (await c.get("/openapi.json")).json()
    for path, ops in spec["paths"].items():
        if not path.startswith("/api/"):
            continue
        for method, op in ops.items():
            codes = set(op["responses"])
            assert {"401", "422"} <= codes, (method, path, codes)
            if "{" in path:
                assert "404" in codes, (method, path, codes)
            error = op["responses"]["401"]["content"]["application/json"]["schema"]
            assert error == {"$ref": "#/components/schemas/Error"}
            ok = next(c for c in codes if c.startswith("2"))
            assert "$ref" in op["responses"][ok]["content"]["application/json"]["schema"]


async def test_the_webhook_says_how_it_is_signed_and_what_it_answers(
    server: ServerProcess,
) -> None:
    async with httpx.AsyncClient(base_url=server.url) as c:
        spec = (await c.get("/openapi.json")).json()
    hook = spec["paths"]["/hooks/{name}"]["post"]
    assert hook["security"] == []  # signed, not a bearer token
    headers = {p["name"]: p for p in hook["parameters"] if p["in"] == "header"}
    assert headers["X-Pizzabot-Signature"]["required"]
    assert headers["X-Pizzabot-Timestamp"]["required"]
    assert "HMAC-SHA256" in hook["description"]
    assert {"202", "401", "404", "409", "413"} <= set(hook["responses"])
    body = spec["components"]["schemas"]["RequestBody"]
    assert [b["required"] for b in body["oneOf"]] == [["tool"], ["question"]]
    assert body["properties"]["callback_url"]["anyOf"][0]["pattern"].startswith("^https?://")


@pytest.mark.timeout(360)  # ~90 s on an idle 2-core machine; its run may take up to 300 s
async def test_schemathesis_finds_no_server_error_and_no_mismatch(
    server: ServerProcess, tmp_path: Path
) -> None:
    config = tmp_path / "schemathesis.toml"
    config.write_text(CONFIG)
    st = Path(sys.executable).parent / "st"
    done = await asyncio.to_thread(
        subprocess.run,
        [
            str(st),
            "--config-file",
            str(config),
            "run",
            f"{server.url}/openapi.json",
            "-H",
            f"Authorization: Bearer {TOKEN}",
            "--checks",
            "all",
            "--max-examples",
            "100",
            "--seed",
            "1234",
            "--workers",
            "1",
            "--no-color",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
