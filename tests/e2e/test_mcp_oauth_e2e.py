"""OAuth for a skill's hosted MCP server, end to end: a real `pizzabot serve`, the scripted
model, and an HTTPS MCP server with its own authorization server (the SDK's server-side auth,
`tests/peers/mcp_oauth.py`). The run's first step needs the server; the person gets a link
card ("crm asks: Connect 127.0.0.1 …"), follows its link with an HTTP client as a browser
would, the service sends it back to `/mcp-auth/callback` on Pizza Bot, and the run's tool call
succeeds. `pizzabot mcp-auth list` shows the connection and `revoke` forgets it and revokes
its tokens at the service (RFC 7009); a forged callback is refused and audited; a refused
scope fails the run and closes the card, saying why on both."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import yaml

from pizzabot.agent.testing.model_server import ScriptedModelServer
from pizzabot.agent.testing.scripts import Reply, ToolCall, last_tool_result
from tests.e2e.test_cli import cli
from tests.peers.mcp_oauth import OAuthMcp
from tests.peers.server import ServerProcess
from tests.peers.stack import Stack


def look_up_then_say(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Reply:
    result = last_tool_result(messages)
    if result is None:
        return Reply(tool_calls=[ToolCall("crm__lookup", {"query": "Ann"})])
    return Reply(text=f"Found: {result}")


@contextlib.asynccontextmanager
async def served(tmp_path: Path, scopes: list[str] | None = None) -> AsyncIterator[Stack]:
    """A server whose skill `sales` reaches the OAuth peer (a `Stack` in shape, for `cli`)."""
    async with OAuthMcp(tmp_path) as peer, ScriptedModelServer(look_up_then_say) as model:
        skills = tmp_path / "skills"
        skills.mkdir()
        crm: dict[str, Any] = {"url": peer.url, "auth": "oauth"}
        if scopes:
            crm["scopes"] = scopes
        skill = {
            "name": "sales",
            "instructions": "Look people up.",
            "model": "openai/scripted",
            "model_options": {"api_base": model.openai_base, "api_key": "x"},
            "mcp_servers": {"crm": crm},
            "tools": {"crm.lookup": "auto"},
        }
        (skills / "sales.yaml").write_text(yaml.safe_dump(skill))
        server = ServerProcess(
            data_dir=tmp_path / "data",
            skills_dir=skills,
            env={"SSL_CERT_FILE": str(peer.certs.ca_file)},
        )
        st = Stack(tmp_path, script=look_up_then_say)
        st.server, st.peer = server, peer  # type: ignore[attr-defined]
        await server.start()
        try:
            yield st
        finally:
            server.stop()


async def follow(st: Stack, item: dict[str, Any]) -> httpx.Response:
    """The person opens the card's link; the service and Pizza Bot do the rest."""
    peer: OAuthMcp = st.peer  # type: ignore[attr-defined]
    verify = peer.certs.client_context()
    async with httpx.AsyncClient(verify=verify, follow_redirects=True, timeout=30) as browser:
        return await browser.get(item["args"]["url"])


async def test_a_person_connects_the_server_from_the_card_and_the_run_goes_on(
    tmp_path: Path,
) -> None:
    async with served(tmp_path) as st:
        run = await st.start_run("sales", "look Ann up")
        card = await st.wait_item(run["id"], status="pending")
        assert card["kind"] == "question" and card["schema"] is None
        assert card["title"].startswith("crm asks: Connect 127.0.0.1")
        page = await follow(st, card)
        assert page.status_code == 200 and page.text.startswith("Connected.")
        assert str(page.url).startswith(f"{st.server.url}/mcp-auth/callback?")
        done = await st.wait_run(run["id"], {"done", "failed"})
        assert done["status"] == "done", done
        assert "Ann Lee" in done["result"]
        closed = await st.wait_item(run["id"], status="cancelled")
        assert "connected to 127.0.0.1" in str(closed)

        listing = await asyncio.to_thread(cli, st, "mcp-auth", "list")
        assert listing.returncode == 0, listing.stderr
        assert "sales" in listing.stdout and "crm.read" in listing.stdout
        token_file = tmp_path / "data" / "mcp-auth" / "sales" / "crm.json"
        secret = yaml.safe_load(token_file.read_text())["tokens"]["access_token"]
        assert secret not in listing.stdout

        again = await st.start_run("sales", "look Ann up again")
        assert (await st.wait_run(again["id"], {"done", "failed"}))["status"] == "done"

        held = yaml.safe_load(token_file.read_text())["tokens"]
        revoked = await asyncio.to_thread(cli, st, "mcp-auth", "revoke", "sales", "crm")
        assert revoked.returncode == 0, revoked.stderr
        assert "at the service: revoked" in revoked.stdout
        assert not token_file.exists()
        # The service was told: both tokens are gone there too.
        provider = st.peer.provider  # type: ignore[attr-defined]
        assert provider.revoked == [held["refresh_token"], held["access_token"]]
        assert held["refresh_token"] not in provider.refresh
        empty = await asyncio.to_thread(cli, st, "mcp-auth", "list")
        assert "sales" not in empty.stdout
        unknown = await asyncio.to_thread(cli, st, "mcp-auth", "revoke", "sales", "crm")
        assert unknown.returncode != 0

        third = await st.start_run("sales", "and once more")
        asked = await st.wait_item(third["id"], status="pending")  # consent asked again
        assert asked["args"]["url"].startswith(f"{st.peer.base}/authorize?")  # type: ignore[attr-defined]
        async with st.client() as c:
            bogus = await c.get("/mcp-auth/callback", params={"state": "forged", "code": "x"})
            assert bogus.status_code == 400
            trail = (await c.get("/api/audit", params={"limit": 500})).json()["items"]
        actions = [e["action"] for e in trail]
        assert "mcp_auth_callback_refused" in actions
        assert "mcp_auth_consent_answered" in actions
        revocation = next(e for e in trail if e["action"] == "mcp_auth_revoked")
        assert revocation["detail"]["at_service"] == "revoked"


async def test_a_refused_scope_fails_the_run_and_says_why_on_the_card(tmp_path: Path) -> None:
    async with served(tmp_path, scopes=["crm.admin"]) as st:
        run = await st.start_run("sales", "look Ann up")
        card = await st.wait_item(run["id"], status="pending")
        page = await follow(st, card)
        assert page.status_code == 200
        assert page.text.startswith("Not connected: the service refused (invalid_scope)")
        failed = await st.wait_run(run["id"], {"done", "failed"})
        assert failed["status"] == "failed"
        said = "MCP server 'crm': not connected to 127.0.0.1: the service refused: invalid_scope"
        assert said in failed["error"]
        closed = await st.wait_item(run["id"], status="cancelled")
        assert "the service refused: invalid_scope" in str(closed)
