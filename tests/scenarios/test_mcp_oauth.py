"""A skill's hosted MCP server behind OAuth 2.1 (`auth: oauth`), reached through the hub: the
first connection asks a person with a link (the authorization URL), the person follows it,
the service sends the browser back with a code, and the tools answer. The tokens are kept
0600 per skill and server, refreshed when they expire (after a restart too), and revocable;
a scope the service refuses, a declined consent and a run without a person are said plainly.

The peer is the SDK's own server-side auth (`tests/peers/mcp_oauth.py`) over HTTPS on loopback,
with a CA made for the test (`SSL_CERT_FILE`, as a deployment's own CA would be given).
"""

from __future__ import annotations

import asyncio
import json
import logging
import stat
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import httpx
import pytest

from pizzabot.agent.errors import RunError
from pizzabot.agent.mcp_oauth import CALLBACK_PATH, McpAuth
from pizzabot.agent.questions import Answer, Question, link_domain
from pizzabot.agent.skills import Skill
from pizzabot.agent.tools import AskFn
from pizzabot.agent.tools_mcp import ToolHub
from tests.peers.mcp_oauth import OAuthMcp

REDIRECT = f"http://127.0.0.1:8787{CALLBACK_PATH}"


@pytest.fixture
async def peer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[OAuthMcp]:
    async with OAuthMcp(tmp_path, expires_in=3600) as p:
        monkeypatch.setenv("SSL_CERT_FILE", str(p.certs.ca_file))
        yield p


def crm(url: str, **extra: Any) -> Skill:
    return Skill.model_validate(
        {
            "name": "sales",
            "instructions": "Look people up.",
            "model": "openai/none",
            "mcp_servers": {"crm": {"url": url, "auth": "oauth", **extra}},
            "tools": {"crm.lookup": "auto"},
        }
    )


class Person:
    """Whoever gets the consent card: follows its link as a browser would, and brings the
    service's redirect back to this server's callback (`McpAuth.finish`)."""

    def __init__(self, auth: McpAuth, peer: OAuthMcp, *, answer: str = "accept") -> None:
        self.auth = auth
        self.peer = peer
        self.answer = answer
        self.asked: list[tuple[str, Question]] = []
        self.pages: list[tuple[int, str]] = []

    def connect(self, server: str) -> AskFn:
        async def ask(question: Question) -> Answer:
            self.asked.append((server, question))
            if self.answer != "accept":
                return Answer(self.answer)  # type: ignore[arg-type]
            assert question.url is not None
            async with httpx.AsyncClient(verify=self.peer.certs.client_context()) as browser:
                sent = await browser.get(question.url)
            assert sent.status_code == 302, sent.text
            back = sent.headers["location"]
            assert back.startswith(REDIRECT)
            self.pages.append(await self.auth.finish(dict(parse_qsl(urlsplit(back).query))))
            return Answer("accept")

        return ask


async def test_the_first_connection_asks_a_person_and_then_the_tools_answer(
    peer: OAuthMcp, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    auth = McpAuth(tmp_path / "mcp-auth", redirect_uri=REDIRECT)
    person = Person(auth, peer)
    hub = ToolHub(auth=auth)
    try:
        specs = await hub.list_tools(crm(peer.url), connect=person.connect)
        outcome = await hub.call(crm(peer.url), "crm", "lookup", {"query": "Ann"})
    finally:
        await hub.aclose()
    assert [s.name for s in specs] == ["lookup"]
    assert not outcome.is_error and "Ann Lee" in outcome.text
    [(server, question)] = person.asked
    assert server == "crm"
    assert question.message.startswith("Connect 127.0.0.1")
    assert question.url is not None and question.url.startswith(f"{peer.base}/authorize?")
    assert link_domain(question.url) == "127.0.0.1"
    assert "code_challenge_method=S256" in question.url  # PKCE
    assert person.pages == [(200, "Connected. You can close this page.")]
    assert peer.provider.granted == [["crm.read"]]  # the scope the challenge named
    # Kept for the skill and server only, readable by this user alone, without the card.
    token_file = tmp_path / "mcp-auth" / "sales" / "crm.json"
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    assert stat.S_IMODE(token_file.parent.stat().st_mode) == 0o700
    kept = json.loads(token_file.read_text())["tokens"]
    for secret in (kept["access_token"], kept["refresh_token"]):
        assert secret not in caplog.text  # never logged
    [row] = auth.connected()
    assert (row.skill, row.server, row.scopes, row.refreshable) == (
        "sales",
        "crm",
        ["crm.read"],
        True,
    )

    # A restart: the kept tokens connect without asking anyone.
    again = ToolHub(auth=McpAuth(tmp_path / "mcp-auth", redirect_uri=REDIRECT))
    try:
        outcome = await again.call(crm(peer.url), "crm", "lookup", {"query": "Bo"})
    finally:
        await again.aclose()
    assert not outcome.is_error and "'Bo'" in outcome.text
    assert peer.provider.consents == 1


async def test_an_expired_token_is_refreshed_without_asking_after_a_restart_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with OAuthMcp(tmp_path, expires_in=1) as peer:
        monkeypatch.setenv("SSL_CERT_FILE", str(peer.certs.ca_file))
        auth = McpAuth(tmp_path / "mcp-auth", redirect_uri=REDIRECT)
        person = Person(auth, peer)
        hub = ToolHub(auth=auth)
        try:
            await hub.list_tools(crm(peer.url), connect=person.connect)
            await asyncio.sleep(1.5)  # the access token's one second is over
            outcome = await hub.call(crm(peer.url), "crm", "lookup", {"query": "Ann"})
        finally:
            await hub.aclose()
        assert not outcome.is_error and "Ann Lee" in outcome.text
        assert peer.provider.refreshes >= 1
        refreshed = peer.provider.refreshes

        await asyncio.sleep(1.5)
        again = ToolHub(auth=McpAuth(tmp_path / "mcp-auth", redirect_uri=REDIRECT))
        try:
            outcome = await again.call(crm(peer.url), "crm", "lookup", {"query": "Bo"})
        finally:
            await again.aclose()
        assert not outcome.is_error
        assert peer.provider.refreshes > refreshed
        assert peer.provider.consents == 1 and len(person.asked) == 1


async def test_revoked_tokens_are_forgotten_and_the_next_connection_asks_again(
    peer: OAuthMcp, tmp_path: Path
) -> None:
    auth = McpAuth(tmp_path / "mcp-auth", redirect_uri=REDIRECT)
    person = Person(auth, peer)
    hub = ToolHub(auth=auth)
    try:
        await hub.list_tools(crm(peer.url), connect=person.connect)
        assert hub.running() == {"sales": ["crm"]}
        held = json.loads((tmp_path / "mcp-auth" / "sales" / "crm.json").read_text())["tokens"]
        assert await auth.revoke("sales", "crm") == "revoked"
        # RFC 7009: the service was told, refresh token first, and no longer takes either.
        assert peer.provider.revoked == [held["refresh_token"], held["access_token"]]
        assert held["access_token"] not in peer.provider.access
        assert hub.running() == {}  # the live connection went with the tokens
        assert auth.connected() == []
        assert await auth.revoke("sales", "crm") is None
        with pytest.raises(RunError, match="wants a person to connect it"):
            await hub.list_tools(crm(peer.url))  # no one to ask: said, not hung
        await hub.list_tools(crm(peer.url), connect=person.connect)
    finally:
        await hub.aclose()
    assert len(person.asked) == 2 and peer.provider.consents == 2


async def test_a_pre_registered_client_revokes_with_its_secret(
    peer: OAuthMcp, tmp_path: Path
) -> None:
    from mcp.shared.auth import OAuthClientInformationFull

    peer.provider.clients["pizzabot"] = OAuthClientInformationFull(
        client_id="pizzabot",
        client_secret="s3cret",
        redirect_uris=[REDIRECT],  # type: ignore[list-item]
        token_endpoint_auth_method="client_secret_basic",
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        scope="crm.read crm.write",
    )
    auth = McpAuth(tmp_path / "mcp-auth", redirect_uri=REDIRECT, env={"CRM_SECRET": "s3cret"})
    skill = crm(peer.url, client_id="pizzabot", client_secret="${CRM_SECRET}")
    hub = ToolHub(auth=auth)
    try:
        await hub.list_tools(skill, connect=Person(auth, peer).connect)
    finally:
        await hub.aclose()
    assert await auth.revoke("sales", "crm") == "revoked"  # HTTP Basic, as at the token endpoint
    assert len(peer.provider.revoked) == 2 and peer.provider.access == {}
    file = tmp_path / "mcp-auth" / "sales" / "crm.json"
    assert not file.exists()


async def test_revoking_where_the_service_cannot_be_told_still_forgets_the_tokens(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    auth = McpAuth(tmp_path / "mcp-auth", redirect_uri=REDIRECT)
    for name, revocation in (("plain", False), ("gone", True)):
        async with OAuthMcp(tmp_path / name, revocation=revocation) as service:
            monkeypatch.setenv("SSL_CERT_FILE", str(service.certs.ca_file))
            hub = ToolHub(auth=auth)
            try:
                skill = crm(service.url).model_copy(update={"name": name})
                await hub.list_tools(skill, connect=Person(auth, service).connect)
            finally:
                await hub.aclose()
            if name == "plain":  # its metadata names no revocation endpoint
                said = await auth.revoke(name, "crm")
                assert said == "not asked: the service names no revocation endpoint"
                assert service.provider.revoked == []
        if name == "gone":  # the service is down by the time the tokens are revoked
            assert await auth.revoke(name, "crm") == "not reached: ConnectError"
    assert auth.connected() == []  # forgotten here in both cases


async def test_a_scope_the_service_refuses_is_said_on_the_run(
    peer: OAuthMcp, tmp_path: Path
) -> None:
    auth = McpAuth(tmp_path / "mcp-auth", redirect_uri=REDIRECT)
    person = Person(auth, peer)
    hub = ToolHub(auth=auth)
    try:
        with pytest.raises(RunError) as refused:
            await hub.list_tools(crm(peer.url, scopes=["crm.admin"]), connect=person.connect)
    finally:
        await hub.aclose()
    assert str(refused.value) == (
        "MCP server 'crm': not connected to 127.0.0.1: the service refused: invalid_scope"
    )
    assert person.pages == [
        (200, "Not connected: the service refused (invalid_scope). You can close this page.")
    ]
    assert auth.connected() == []


async def test_a_declined_consent_fails_the_connection_plainly(
    peer: OAuthMcp, tmp_path: Path
) -> None:
    auth = McpAuth(tmp_path / "mcp-auth", redirect_uri=REDIRECT)
    hub = ToolHub(auth=auth)
    try:
        with pytest.raises(RunError) as refused:
            await hub.list_tools(
                crm(peer.url), connect=Person(auth, peer, answer="decline").connect
            )
    finally:
        await hub.aclose()
    assert "not connected to 127.0.0.1: the consent to connect it was declined" in str(
        refused.value
    )
    assert auth.waiting == {}


async def test_a_callback_nobody_waits_for_is_refused(tmp_path: Path) -> None:
    auth = McpAuth(tmp_path / "mcp-auth", redirect_uri=REDIRECT)
    assert (await auth.finish({"state": "made-up", "code": "x"}))[0] == 400
    assert (await auth.finish({"code": "x"}))[0] == 400


def test_oauth_settings_need_auth_oauth() -> None:
    with pytest.raises(ValueError, match="need auth: oauth"):
        Skill.model_validate(
            {
                "name": "s",
                "instructions": "x",
                "model": "openai/none",
                "mcp_servers": {"crm": {"url": "https://crm.example/mcp", "scopes": ["a"]}},
            }
        )
    with pytest.raises(ValueError, match=r"must name an environment variable"):
        crm("https://crm.example/mcp", client_id="pizzabot", client_secret="plain-secret")


async def test_a_sign_in_link_a_card_cannot_offer_is_refused_plainly(tmp_path: Path) -> None:
    from pizzabot.agent.mcp_call import CallQuestions
    from pizzabot.agent.mcp_oauth import Consent, _Flow

    asked: list[Question] = []

    async def ask(question: Question) -> Answer:
        asked.append(question)
        return Answer("accept")

    auth = McpAuth(tmp_path / "mcp-auth", redirect_uri=REDIRECT)
    flow = _Flow(auth, "crm", "https://crm.example/mcp", lambda: Consent(CallQuestions(ask)))
    with pytest.raises(
        RunError, match=r"crm.example's sign-in link cannot be offered: only a link"
    ):
        await flow.redirect("http://crm.example/authorize?state=s")
    assert asked == [] and auth.waiting == {}
