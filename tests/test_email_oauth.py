"""OAuth (SASL XOAUTH2) for the bot's mailbox, against a real token endpoint and real servers.

A local OAuth provider (tests/peers/oauth_server.py) trades refresh tokens for access tokens
over HTTP; dovecot checks each access token through its `oauth2` passdb, which asks the same
provider's introspection endpoint; the SMTP front checks it too. So every test here runs the
whole chain: refresh -> access token -> SASL XOAUTH2 -> the server's verdict.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import uuid
from collections.abc import Iterator
from email.message import EmailMessage
from email.utils import make_msgid
from pathlib import Path

import aiosmtplib
import pytest
from pydantic import SecretStr

from pizzabot.agent.channel import DeliveryError
from pizzabot.bot.settings import Settings
from pizzabot.bot.wire_email import oauth_tokens
from pizzabot.channels.email import ImapConfig, ImapReceiver, SmtpConfig, SmtpMailer
from pizzabot.channels.email.oauth import (
    MICROSOFT_SCOPE,
    OAuthConfig,
    OAuthError,
    OAuthRefused,
    OAuthTokens,
)
from tests.peers.mailserver import DEFAULT_USERS, MailServer
from tests.peers.oauth_server import Grant, OAuthServer
from tests.peers.required import require
from tests.waiting import eventually

pytestmark = pytest.mark.mail

ALICE_PW = DEFAULT_USERS["alice"]
# Mailboxes made before dovecot starts: it re-reads its passwd file at most once a second,
# so a user added while it runs may not log in at once.
SPARE = {f"ox{n}": uuid.uuid4().hex for n in range(12)}


@pytest.fixture(scope="module")
def provider() -> Iterator[OAuthServer]:
    with OAuthServer() as server:
        yield server


@pytest.fixture(scope="module")
def mail(provider: OAuthServer) -> Iterator[MailServer]:
    require("mail")
    with MailServer(users={**DEFAULT_USERS, **SPARE}, tls=True, oauth=provider) as server:
        yield server


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def tokens_for(
    provider: OAuthServer,
    grant: Grant,
    *,
    clock: Clock | None = None,
    sleeps: list[float] | None = None,
) -> OAuthTokens:
    async def sleep(seconds: float) -> None:
        if sleeps is not None:
            sleeps.append(seconds)

    return OAuthTokens(
        OAuthConfig(
            token_url=provider.token_url,
            client_id=grant.client_id,
            client_secret=grant.client_secret,
            refresh_token=grant.refresh_token,
            scope="mail",
        ),
        clock=clock or Clock(),
        sleep=sleep,
    )


def spare_user(mail: MailServer, prefix: str) -> tuple[str, str]:
    """An unused mailbox of the module's server (so tests don't share mail), and its password."""
    name = next(
        n for n in sorted(mail.users) if n.startswith(prefix) and (id(mail), n) not in _taken
    )
    _taken.add((id(mail), name))
    return name, mail.users[name]


_taken: set[tuple[int, str]] = set()


def fresh_mailbox(mail: MailServer, provider: OAuthServer) -> tuple[str, Grant]:
    """An unused mailbox and a refresh token for it."""
    name, _ = spare_user(mail, "ox")
    address = mail.address(name)
    return address, provider.grant(address)


def message(*, sender: str, to: str) -> EmailMessage:
    msg = EmailMessage()
    msg["From"] = sender
    msg["To"] = to
    msg["Subject"] = f"oauth {uuid.uuid4().hex[:12]}"
    msg["Message-ID"] = make_msgid(domain="example.test")
    msg.set_content("hello over XOAUTH2")
    return msg


async def send_as_alice(mail: MailServer, msg: EmailMessage) -> None:
    await aiosmtplib.send(
        msg,
        hostname=mail.host,
        port=mail.smtp_port,
        start_tls=True,
        tls_context=mail.certs.client_context(),
        username="alice",
        password=ALICE_PW,
    )


def imap_config(mail: MailServer, address: str) -> ImapConfig:
    return ImapConfig(
        host=mail.host,
        port=mail.imap_port,
        tls="starttls",
        user=address,
        ssl_context=mail.certs.client_context(),
        timeout=5.0,
        backoff_initial=0.05,
        backoff_max=0.2,
    )


def smtp_config(mail: MailServer, address: str) -> SmtpConfig:
    return SmtpConfig(
        host=mail.host,
        port=mail.smtp_port,
        tls="starttls",
        user=address,
        ssl_context=mail.certs.client_context(),
        timeout=10.0,
    )


class Inbox:
    """The receiver's handler: records each mail's subject."""

    def __init__(self) -> None:
        self.subjects: list[str] = []

    async def __call__(self, raw: bytes, *, size: int | None, fallback_id: str) -> str:
        for line in raw.splitlines():
            if line.startswith(b"Subject: "):
                self.subjects.append(line[len(b"Subject: ") :].decode())
        return "handled"

    async def wait_for(self, subject: str) -> None:
        await eventually(
            lambda: subject in self.subjects,
            what=f"the receiver to hand over the mail {subject!r}",
            context=lambda: f"subjects handed over: {self.subjects}",
        )


def assert_logged_without_credentials(log: str, user: str, token: str) -> None:
    """aioimaplib logs the exchange at DEBUG: the token may not be in it, raw or encoded."""
    assert "AUTHENTICATE" in log
    initial = base64.b64encode(f"user={user}\x01auth=Bearer {token}\x01\x01".encode()).decode()
    assert token not in log and initial not in log


# ----- the token endpoint -----------------------------------------------------------------


async def test_one_refresh_serves_every_caller_until_the_token_nears_expiry(
    provider: OAuthServer,
) -> None:
    grant = provider.grant("bot@example.test")
    clock = Clock()
    tokens = tokens_for(provider, grant, clock=clock)
    before = len(provider.token_requests)

    first, *others = await asyncio.gather(*(tokens.token() for _ in range(5)))

    assert set(others) == {first} and provider.check_token(first) == "bot@example.test"
    [form] = provider.token_requests[before:]
    assert form == {
        "grant_type": "refresh_token",
        "client_id": grant.client_id,
        "client_secret": grant.client_secret,
        "refresh_token": grant.refresh_token,
        "scope": "mail",
    }
    clock.now += provider.expires_in - 600  # still well inside its life
    assert await tokens.token() == first
    clock.now += 400  # within the margin before expiry: refreshed ahead of time
    second = await tokens.token()
    assert second != first and len(provider.token_requests) == before + 2


async def test_a_token_endpoint_outage_is_retried_with_backoff(provider: OAuthServer) -> None:
    grant = provider.grant("bot@example.test")
    sleeps: list[float] = []
    tokens = tokens_for(provider, grant, sleeps=sleeps)
    before = len(provider.token_requests)
    provider.fail_next(503, 429)

    token = await tokens.token()

    assert provider.check_token(token) == "bot@example.test"
    assert len(provider.token_requests) == before + 3
    assert len(sleeps) == 2 and sleeps[0] <= sleeps[1]


async def test_an_endpoint_that_stays_down_is_an_error_after_the_attempts(
    provider: OAuthServer,
) -> None:
    grant = provider.grant("bot@example.test")
    tokens = tokens_for(provider, grant)
    before = len(provider.token_requests)
    provider.fail_next(*[502] * tokens.config.attempts)

    with pytest.raises(OAuthError, match="502"):
        await tokens.token()

    assert len(provider.token_requests) == before + tokens.config.attempts


async def test_an_unreachable_endpoint_is_an_error_not_a_hang() -> None:
    tokens = OAuthTokens(
        OAuthConfig(token_url="http://127.0.0.1:9/token", client_id="c", refresh_token="r"),
        sleep=lambda _s: asyncio.sleep(0),
    )
    with pytest.raises(OAuthError, match="ConnectError"):
        await tokens.token()


async def test_a_revoked_refresh_token_is_refused_at_once_and_the_error_names_no_secret(
    provider: OAuthServer,
) -> None:
    grant = provider.grant("bot@example.test")
    revoked = Grant(grant.user, grant.client_id, grant.client_secret, "rt-revoked-secret-value")
    tokens = tokens_for(provider, revoked)
    before = len(provider.token_requests)

    with pytest.raises(OAuthRefused) as caught:
        await tokens.token()

    text = str(caught.value)
    assert "invalid_grant" in text and "make a new one" in text
    assert revoked.refresh_token not in text and grant.client_secret not in text
    assert grant.client_secret not in repr(tokens.config)
    assert len(provider.token_requests) == before + 1  # a refusal is not retried


async def test_a_wrong_client_secret_says_so(provider: OAuthServer) -> None:
    grant = provider.grant("bot@example.test")
    wrong = Grant(grant.user, grant.client_id, "cs-wrong", grant.refresh_token)
    with pytest.raises(OAuthRefused, match=r"invalid_client.*client ID or secret"):
        await tokens_for(provider, wrong).token()


# ----- IMAP -------------------------------------------------------------------------------


async def test_the_receiver_reads_its_mailbox_with_xoauth2(
    mail: MailServer, provider: OAuthServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)  # aioimaplib logs every line it sends at DEBUG
    address, grant = fresh_mailbox(mail, provider)
    before = len(provider.token_requests)
    inbox = Inbox()
    tokens = tokens_for(provider, grant)
    receiver = ImapReceiver(imap_config(mail, address), inbox, tokens=tokens)
    task = asyncio.create_task(receiver.run_forever())
    try:
        async with asyncio.timeout(10):
            await receiver.connected.wait()
        msg = message(sender=mail.address("alice"), to=address)
        await send_as_alice(mail, msg)
        await inbox.wait_for(str(msg["Subject"]))
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    assert len(provider.token_requests) == before + 1
    [login] = [line for line in mail.imap_logins() if f"user=<{address}>" in line]
    assert "method=XOAUTH2" in login and ", TLS," in login
    assert_logged_without_credentials(caplog.text, address, await tokens.token())
    assert grant.refresh_token not in caplog.text


async def test_a_refused_token_is_replaced_once_and_the_login_goes_on(
    mail: MailServer, provider: OAuthServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    address, grant = fresh_mailbox(mail, provider)
    tokens = tokens_for(provider, grant)
    stale = await tokens.token()
    provider.revoke_access_tokens()  # the server no longer accepts the cached token
    before = len(provider.token_requests)
    receiver = ImapReceiver(imap_config(mail, address), Inbox(), tokens=tokens)
    task = asyncio.create_task(receiver.run_forever())
    try:
        async with asyncio.timeout(10):
            await receiver.connected.wait()
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    assert receiver.connects == 1 and receiver.failures == 0
    assert len(provider.token_requests) == before + 1
    fresh = await tokens.token()
    assert fresh != stale
    # The refusal's continuation is where aioimaplib logs the running command.
    assert "continuation line" in caplog.text
    assert_logged_without_credentials(caplog.text, address, stale)
    assert_logged_without_credentials(caplog.text, address, fresh)


async def test_a_token_for_another_mailbox_is_refused_after_one_fresh_try(
    mail: MailServer, provider: OAuthServer
) -> None:
    address, _ = fresh_mailbox(mail, provider)
    others = provider.grant(mail.address("alice"))
    before = len(provider.token_requests)
    backing_off = asyncio.Event()

    async def sleep(_seconds: float) -> None:
        backing_off.set()
        await asyncio.Event().wait()  # park the loop here: one round is the story

    receiver = ImapReceiver(
        imap_config(mail, address), Inbox(), tokens=tokens_for(provider, others), sleep=sleep
    )
    task = asyncio.create_task(receiver.run_forever())
    try:
        async with asyncio.timeout(10):
            await backing_off.wait()
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    assert receiver.failures == 1 and receiver.connects == 0
    assert len(provider.token_requests) == before + 2  # the first token, then one fresh one
    assert not [line for line in mail.imap_logins() if f"user=<{address}>" in line]


# ----- SMTP -------------------------------------------------------------------------------


async def test_the_mailer_sends_with_xoauth2_after_starttls(
    mail: MailServer, provider: OAuthServer
) -> None:
    address, grant = fresh_mailbox(mail, provider)
    mailer = SmtpMailer(smtp_config(mail, address), tokens=tokens_for(provider, grant))
    msg = message(sender=address, to=mail.address("alice"))

    await mailer.send(msg)

    got = await mail.wait_for_mail("alice", ALICE_PW, lambda m: m["Subject"] == msg["Subject"])
    assert got["Message-ID"] == msg["Message-ID"]
    assert mail.smtp_xoauth2_logins[-1] == address


async def test_the_mailer_replaces_a_refused_token_once(
    mail: MailServer, provider: OAuthServer
) -> None:
    address, grant = fresh_mailbox(mail, provider)
    tokens = tokens_for(provider, grant)
    await tokens.token()
    provider.revoke_access_tokens()
    before = len(provider.token_requests)
    msg = message(sender=address, to=mail.address("alice"))

    await SmtpMailer(smtp_config(mail, address), tokens=tokens).send(msg)

    await mail.wait_for_mail("alice", ALICE_PW, lambda m: m["Subject"] == msg["Subject"])
    assert len(provider.token_requests) == before + 1


async def test_a_refused_smtp_login_is_a_delivery_error_the_outbox_retries(
    mail: MailServer, provider: OAuthServer
) -> None:
    address, _ = fresh_mailbox(mail, provider)
    others = provider.grant(mail.address("alice"))
    msg = message(sender=address, to=mail.address("alice"))
    before = len(provider.token_requests)

    with pytest.raises(DeliveryError, match=r"login as .* refused: 535") as caught:
        await SmtpMailer(smtp_config(mail, address), tokens=tokens_for(provider, others)).send(msg)

    assert not caught.value.permanent  # fixing the account must let the mail go out
    assert len(provider.token_requests) == before + 2
    assert address not in mail.smtp_xoauth2_logins


async def test_no_token_no_mail(mail: MailServer, provider: OAuthServer) -> None:
    address, grant = fresh_mailbox(mail, provider)
    revoked = Grant(grant.user, grant.client_id, grant.client_secret, "rt-gone")
    mailer = SmtpMailer(smtp_config(mail, address), tokens=tokens_for(provider, revoked))
    with pytest.raises(DeliveryError, match=r"no OAuth token.*invalid_grant") as caught:
        await mailer.send(message(sender=address, to=mail.address("alice")))
    assert not caught.value.permanent


# ----- settings ---------------------------------------------------------------------------


def oauth_settings(tmp_path: Path, **overrides: object) -> Settings:
    values: dict[str, object] = {
        "data_dir": tmp_path,
        "imap_auth": "xoauth2",
        "oauth_provider": "microsoft",
        "oauth_tenant": "contoso.onmicrosoft.com",
        "oauth_client_id": "app-id",
        "oauth_client_secret": "app-secret",
        "oauth_refresh_token": "rt-configured",
    }
    return Settings(**{**values, **overrides})  # type: ignore[arg-type]


def test_microsoft_settings_use_the_tenants_token_url_and_mail_scopes(tmp_path: Path) -> None:
    tokens = oauth_settings(tmp_path)
    made = oauth_tokens(tokens)
    assert made is not None
    assert made.config.token_url == (
        "https://login.microsoftonline.com/contoso.onmicrosoft.com/oauth2/v2.0/token"
    )
    assert made.config.scope == MICROSOFT_SCOPE
    assert "offline_access" in MICROSOFT_SCOPE and "SMTP.Send" in MICROSOFT_SCOPE
    google = oauth_tokens(oauth_settings(tmp_path, oauth_provider="google", oauth_tenant=None))
    assert google is not None
    assert google.config.token_url == "https://oauth2.googleapis.com/token"
    assert google.config.scope == "https://mail.google.com/"


def test_half_configured_oauth_stops_the_start_naming_the_setting(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="PIZZABOT_OAUTH_TENANT"):
        oauth_tokens(oauth_settings(tmp_path, oauth_tenant=None))
    with pytest.raises(ValueError, match="PIZZABOT_OAUTH_PROVIDER"):
        oauth_tokens(oauth_settings(tmp_path, oauth_provider=None))
    with pytest.raises(ValueError, match="PIZZABOT_OAUTH_REFRESH_TOKEN"):
        oauth_tokens(oauth_settings(tmp_path, oauth_refresh_token=None))
    with pytest.raises(ValueError, match="PIZZABOT_OAUTH_TOKEN_URL"):
        oauth_tokens(oauth_settings(tmp_path, oauth_provider="custom"))
    assert oauth_tokens(oauth_settings(tmp_path, imap_auth="password")) is None


async def test_a_rotated_refresh_token_is_kept_and_used_after_a_restart(tmp_path: Path) -> None:
    with OAuthServer(rotate=True) as rotating:
        grant = rotating.grant("bot@example.test")
        settings = oauth_settings(
            tmp_path,
            oauth_provider="custom",
            oauth_token_url=rotating.token_url,
            oauth_client_id=grant.client_id,
            oauth_client_secret=grant.client_secret,
            oauth_refresh_token=grant.refresh_token,
        )
        first = oauth_tokens(settings)
        assert first is not None
        await first.token()  # the configured refresh token is now retired by the provider

        kept = tmp_path / "mail-oauth-refresh-token"
        assert kept.stat().st_mode & 0o777 == 0o600
        assert grant.refresh_token not in kept.read_text()

        restarted = oauth_tokens(settings)
        assert restarted is not None
        token = await restarted.token()
        assert rotating.check_token(token) == "bot@example.test"

        # A newly configured refresh token wins over one kept for the old one.
        newer = rotating.grant("bot@example.test")
        reconfigured = oauth_tokens(
            settings.model_copy(update={"oauth_refresh_token": SecretStr(newer.refresh_token)})
        )
        assert reconfigured is not None
        assert reconfigured.config.refresh_token == newer.refresh_token
        assert json.loads(kept.read_text())["token"] != newer.refresh_token


def test_imap_tls_keeps_its_old_true_and_false(monkeypatch: pytest.MonkeyPatch) -> None:
    for given, meant in [("true", "tls"), ("false", "none"), ("starttls", "starttls")]:
        monkeypatch.setenv("PIZZABOT_IMAP_TLS", given)
        assert Settings().imap_tls == meant
