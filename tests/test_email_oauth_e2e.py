"""A real `pizzabot serve` configured like a Microsoft 365 / Google Workspace mailbox:
IMAP on port 143 with STARTTLS, SMTP submission with STARTTLS, both logging in with SASL
XOAUTH2 and tokens from an OAuth client's refresh token, nothing but `PIZZABOT_*` settings.

Alice gets the action by mail (sent with XOAUTH2), approves by replying, and the bot reads
her reply (over XOAUTH2) and goes on. The provider saw one refresh for both protocols.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import aiosmtplib
import pytest

from pizzabot.agent.testing.scripts import count_role, last_tool_result
from tests.peers.email_bot import AUTHSERV_ID, reply_to
from tests.peers.mailserver import DEFAULT_USERS, MailServer
from tests.peers.oauth_server import OAuthServer
from tests.peers.required import require
from tests.peers.stack import Reply, Stack, ToolCall

pytestmark = pytest.mark.mail

ALICE = "alice@example.test"
ALICE_PW = DEFAULT_USERS["alice"]
BOT = "bot@example.test"
SKILL = {"deliver": {"email": [ALICE]}, "approvers": {"email": [ALICE]}}


@pytest.fixture(scope="module")
def provider() -> Iterator[OAuthServer]:
    with OAuthServer() as server:
        yield server


@pytest.fixture(scope="module")
def mail(provider: OAuthServer) -> Iterator[MailServer]:
    require("mail")
    with MailServer(tls=True, oauth=provider) as server:
        yield server


def one_mail_then_report(messages: list[dict[str, object]], tools: object) -> Reply:
    if count_role(messages, "tool") == 0:
        args = {"to": "ann@example.com", "subject": "Quote", "body": "Here.", "copies": 1}
        return Reply(text="Mailing Ann.", tool_calls=[ToolCall("crm__send_email", args, id="c1")])
    return Reply(text=f"Done: {last_tool_result(messages)}")


async def test_a_run_decided_by_mail_over_starttls_and_xoauth2(
    mail: MailServer, provider: OAuthServer, tmp_path: Path
) -> None:
    grant = provider.grant(BOT)
    env = {
        "PIZZABOT_EMAIL_FROM": BOT,
        "PIZZABOT_SMTP_HOST": mail.host,
        "PIZZABOT_SMTP_PORT": str(mail.smtp_port),
        "PIZZABOT_SMTP_TLS": "starttls",
        "PIZZABOT_SMTP_AUTH": "xoauth2",
        "PIZZABOT_IMAP_HOST": mail.host,
        "PIZZABOT_IMAP_PORT": str(mail.imap_port),
        "PIZZABOT_IMAP_TLS": "starttls",
        "PIZZABOT_IMAP_AUTH": "xoauth2",
        "PIZZABOT_IMAP_BACKOFF_MAX": "1",
        "PIZZABOT_EMAIL_AUTHSERV_ID": AUTHSERV_ID,
        "PIZZABOT_OAUTH_PROVIDER": "custom",
        "PIZZABOT_OAUTH_TOKEN_URL": provider.token_url,
        "PIZZABOT_OAUTH_CLIENT_ID": grant.client_id,
        "PIZZABOT_OAUTH_CLIENT_SECRET": grant.client_secret,
        "PIZZABOT_OAUTH_REFRESH_TOKEN": grant.refresh_token,
        # The server trusts the test CA the way an admin adds a private CA: OpenSSL's variable.
        "SSL_CERT_FILE": str(mail.certs.ca_file),
    }
    async with Stack(tmp_path, script=one_mail_then_report, skill=SKILL, env=env) as st:
        run = await st.start_run("test", "send the quote")
        item = await st.wait_item(run["id"])
        action = await mail.wait_for_mail(
            "alice", ALICE_PW, lambda m: m["X-Pizzabot-Item"] == item["id"], timeout=30
        )
        await aiosmtplib.send(
            reply_to(action, "approve"),
            hostname=mail.host,
            port=mail.smtp_port,
            start_tls=True,
            tls_context=mail.certs.client_context(),
            username="alice",
            password=ALICE_PW,
        )
        done = await st.wait_run(run["id"], {"done"})

        decision = [e for e in done["events"] if e["kind"] == "decision"][-1]["data"]
        assert decision["decision"] == "approve" and decision["channel"] == "email"
        assert decision["actor"] == ALICE
        assert BOT in mail.smtp_xoauth2_logins
        bot_logins = [line for line in mail.imap_logins() if f"user=<{BOT}>" in line]
        assert bot_logins and all("method=XOAUTH2" in x and ", TLS," in x for x in bot_logins)
        # One access token served IMAP and SMTP alike.
        assert [r["refresh_token"] for r in provider.token_requests] == [grant.refresh_token]
        log = st.server.log_path.read_text(errors="replace")
        assert "Email: reading replies from" in log  # the log is there, and says nothing secret:
        for secret in (grant.client_secret, grant.refresh_token):
            assert secret not in log
