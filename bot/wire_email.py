"""Plugs the email channel (channels/email) into the app: the channel items are mailed on,
what reads mail (links, the mailbox watcher), its routes, and its receiver in the lifespan.

Email is on when `PIZZABOT_EMAIL_FROM` and `PIZZABOT_SMTP_HOST` are set: items are mailed
(SMTP). The one-time decision links are put in mails and served under `/mail/d/` only when
`PIZZABOT_PUBLIC_URL` says where people reach the server. With `PIZZABOT_IMAP_HOST` too,
the bot's mailbox is watched for replies and new runs. Links and reply tokens are signed
with the mail key: `PIZZABOT_EMAIL_KEY`, else one kept in the data folder (`mail-key`).

`PIZZABOT_IMAP_AUTH` / `PIZZABOT_SMTP_AUTH=xoauth2` log in with OAuth access tokens from one
`OAuthTokens` (shared, so IMAP and SMTP refresh once between them), made from the
`PIZZABOT_OAUTH_*` settings. A refresh token the provider rotates (Microsoft does, on every
use) is kept in the data folder (`mail-oauth-refresh-token`, 0600) and used after a restart,
for as long as the configured one is the one it replaced.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from fastapi import FastAPI, Request

from pizzabot.agent.policy import Access
from pizzabot.bot.core import Core
from pizzabot.bot.services import EmailParts, Services
from pizzabot.bot.settings import Settings
from pizzabot.store.sql import SqlStore

if TYPE_CHECKING:
    # Imported when email is on (see `outlet`, `install`): a server without it never loads
    # the mail stack (IMAP, OAuth, MIME parsing).
    from pizzabot.channels.email import (
        EmailChannel,
        ImapReceiver,
        InboundConfig,
        LinkDesk,
        MailHandler,
        MailKey,
        SmtpMailer,
    )
    from pizzabot.channels.email.oauth import OAuthTokens

log = logging.getLogger("pizzabot.email")


def enabled(settings: Settings) -> bool:
    return bool(settings.email_from and settings.smtp_host)


def _desk(request: Request) -> LinkDesk | None:
    svc: Services | None = getattr(request.app.state, "services", None)
    return svc.email.desk if svc is not None and svc.email is not None else None


def install(app: FastAPI, settings: Settings) -> None:
    # Without a public URL no mail carries a link, so no route takes one either.
    if enabled(settings) and settings.public_url:
        from pizzabot.channels.email import links_router

        app.include_router(links_router(_desk))


def mail_key(settings: Settings) -> MailKey:
    """The key that signs decision links and reply tokens; it never leaves the server."""
    from pizzabot.channels.email.keys import MailKey, kept_key

    if settings.email_key is not None:
        text = settings.email_key.get_secret_value()
    else:
        text = kept_key(settings.data_dir / "mail-key")
    if len(text.encode()) < 32:
        raise ValueError("PIZZABOT_EMAIL_KEY must be at least 32 characters")
    return MailKey(text.encode())


def oauth_tokens(settings: Settings) -> OAuthTokens | None:
    """The OAuth token source when IMAP or SMTP logs in with XOAUTH2, else None.

    Raises ValueError naming the missing setting: a half-configured OAuth client must stop
    the start, not fail later at every login.
    """
    s = settings
    if "xoauth2" not in (s.imap_auth, s.smtp_auth):
        return None
    from pizzabot.channels.email.oauth import OAuthConfig, OAuthTokens, provider_defaults
    from pizzabot.channels.email.oauth_file import RotatedToken

    if s.oauth_provider is None:
        raise ValueError("XOAUTH2 needs PIZZABOT_OAUTH_PROVIDER (google, microsoft or custom)")
    default_url, default_scope = provider_defaults(s.oauth_provider, tenant=s.oauth_tenant)
    token_url = s.oauth_token_url or default_url
    if not token_url:
        which = "PIZZABOT_OAUTH_TENANT" if s.oauth_provider == "microsoft" else ""
        raise ValueError(
            f"XOAUTH2 with provider {s.oauth_provider} needs "
            + (f"{which} or PIZZABOT_OAUTH_TOKEN_URL" if which else "PIZZABOT_OAUTH_TOKEN_URL")
        )
    configured = _secret(s.oauth_refresh_token)
    if not s.oauth_client_id or not configured:
        raise ValueError("XOAUTH2 needs PIZZABOT_OAUTH_CLIENT_ID and PIZZABOT_OAUTH_REFRESH_TOKEN")
    rotated = RotatedToken(s.data_dir / "mail-oauth-refresh-token", configured)
    config = OAuthConfig(
        token_url=token_url,
        client_id=s.oauth_client_id,
        client_secret=_secret(s.oauth_client_secret),
        refresh_token=rotated.newest() or configured,
        scope=s.oauth_scope if s.oauth_scope is not None else default_scope or None,
    )
    return OAuthTokens(config, on_refresh_token=rotated.keep)


def _secret(value: object) -> str | None:
    get = getattr(value, "get_secret_value", None)
    return str(get()) if get is not None else None


def _mailer(s: Settings, tokens: OAuthTokens | None) -> SmtpMailer:
    from pizzabot.channels.email import SmtpConfig, SmtpMailer

    smtp_oauth = s.smtp_auth == "xoauth2"
    assert s.smtp_host is not None  # `start` checked it
    return SmtpMailer(
        SmtpConfig(
            host=s.smtp_host,
            port=s.smtp_port,
            tls=s.smtp_tls,
            user=s.smtp_user or (s.email_from if smtp_oauth else None),
            password=None if smtp_oauth else _secret(s.smtp_password),
            timeout=s.smtp_timeout,
        ),
        tokens=tokens if smtp_oauth else None,
    )


def _warn_undecidable(svc: Services) -> None:
    for skill in svc.ctx.skills.all():
        if skill.deliver.email and not skill.approvers.email:
            log.warning(
                "Email: skill %s mails items but has no approvers.email: "
                "nobody can decide its items by mail",
                skill.name,
            )


def _inbound(s: Settings) -> InboundConfig:
    from pizzabot.channels.email import InboundConfig, MailTrust

    return InboundConfig(
        default_skill=s.email_default_skill,
        trust=MailTrust(rule=s.email_trust, authserv_id=s.email_authserv_id),
        max_bytes=s.email_max_bytes,
    )


def trust_warning(settings: Settings) -> str | None:
    """What to tell the operator at start about the mail trust rule, when it is not the
    safe default with its server named; None when there is nothing to warn of."""
    s = settings
    if s.email_trust == "mailbox":
        return (
            "PIZZABOT_EMAIL_TRUST=mailbox: a mail is believed to come from its From unless "
            "its Authentication-Results say it was forged. Use it only when the mailbox's "
            "server rejects spoofed mail before delivery; otherwise anyone can decide or "
            "start runs by forging an approver's or allowed sender's address"
        )
    if not s.email_authserv_id:
        return (
            "no mail can decide, follow up or start runs: set PIZZABOT_EMAIL_AUTHSERV_ID to "
            "the authserv-id of the server that receives the bot's mail (the first word of "
            "the Authentication-Results header it adds), or PIZZABOT_EMAIL_TRUST=mailbox if "
            "that server rejects spoofed mail itself"
        )
    return None


def _receiver(s: Settings, handler: MailHandler, tokens: OAuthTokens | None) -> ImapReceiver:
    from pizzabot.channels.email import ImapConfig, ImapReceiver

    assert s.imap_host is not None and s.email_from is not None  # `start` checked both
    return ImapReceiver(
        ImapConfig(
            host=s.imap_host,
            port=s.imap_port,
            tls=s.imap_tls,
            user=s.imap_user or s.email_from,
            password=_secret(s.imap_password) or "",
            folder=s.imap_folder,
            idle_refresh=s.imap_idle_refresh,
            poll_interval=s.imap_poll_interval,
            backoff_max=s.imap_backoff_max,
            max_bytes=s.email_max_bytes,
        ),
        handler.handle,
        tokens=tokens if s.imap_auth == "xoauth2" else None,
    )


@dataclass(frozen=True)
class EmailOutlet:
    """The email channel and what the receiving side shares with it."""

    channel: EmailChannel
    #: XOAUTH2 tokens, shared by SMTP and IMAP so they refresh once between them.
    tokens: OAuthTokens | None


def outlet(
    settings: Settings, *, store: SqlStore, access: Access, clock: Callable[[], datetime]
) -> EmailOutlet | None:
    """The email channel items are mailed on, when the settings turn email on (else None).

    Raises ValueError for a key or an OAuth client configured wrong: that stops the start."""
    s = settings
    if not enabled(s) or s.email_from is None or s.smtp_host is None:
        return None
    from pizzabot.channels.email import EmailChannel, MailIdentity

    identity = MailIdentity(
        address=s.email_from.strip().lower(),
        name=s.email_from_name,
        plus_address=s.email_plus_address,
    )
    tokens = oauth_tokens(s)
    channel = EmailChannel(
        mailer=_mailer(s, tokens),
        identity=identity,
        store=store,
        access=access,
        key=mail_key(s),
        public_url=s.public_url,
        link_ttl=s.email_link_ttl,
        clock=clock,
    )
    return EmailOutlet(channel=channel, tokens=tokens)


def build(
    settings: Settings, *, outlet: EmailOutlet | None, core: Core, store: SqlStore, access: Access
) -> EmailParts | None:
    """What reads mail: the decision links' desk (with a public URL) and the mailbox
    watcher (with an IMAP host), both answering through the channel. None without mail."""
    if outlet is None:
        return None
    from pizzabot.channels.email import LinkDesk, MailHandler
    from pizzabot.store.mail import SqlMailLog

    s, channel, clock = settings, outlet.channel, core.ctx.clock
    mail_log = SqlMailLog(store)
    desk = None
    if s.public_url:
        desk = LinkDesk(store=store, inbox=core.inbox, log=mail_log, key=channel.key, clock=clock)
    receiver = None
    if s.imap_host:
        handler = MailHandler(
            store=store,
            inbox=core.inbox,
            runs=core.runs,
            skills=core.ctx.skills,
            access=access,
            log=mail_log,
            answerer=channel,
            identity=channel.identity,
            key=channel.key,
            config=_inbound(s),
            clock=clock,
        )
        receiver = _receiver(s, handler, outlet.tokens)
    return EmailParts(channel=channel, desk=desk, receiver=receiver)


def start(svc: Services, email: EmailParts) -> None:
    s = svc.settings
    login = s.smtp_auth if s.smtp_user or s.smtp_auth == "xoauth2" else "no"
    smtp = (s.smtp_host, s.smtp_port)
    address = email.channel.identity.address
    log.info("Email: sending as %s via %s:%s (%s login)", address, *smtp, login)
    _warn_undecidable(svc)
    if email.receiver is None:
        log.info("email: sending only (set PIZZABOT_IMAP_HOST to read replies)")
        return
    imap = (s.imap_host, s.imap_port, s.imap_folder, s.imap_tls, s.imap_auth)
    log.info("Email: reading replies from %s:%s/%s (%s, %s login)", *imap)
    warning = trust_warning(s)
    if warning is not None:
        log.warning("Email: %s", warning)
    svc.spawn_singleton("email-receiver", email.receiver.run_forever)
