"""Plugs the email channel (channels/email) into the app: routes at creation, receivers in the lifespan.

Email is on when `PIZZABOT_EMAIL_FROM` and `PIZZABOT_SMTP_HOST` are set: items are mailed
(SMTP) and the one-time decision links are served under `/mail/d/`. With
`PIZZABOT_IMAP_HOST` too, the bot's mailbox is watched for replies and new runs.
"""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request

from bot.services import Services
from bot.settings import Settings
from channels.email import (
    EmailChannel,
    ImapConfig,
    ImapReceiver,
    InboundConfig,
    LinkDesk,
    MailHandler,
    MailIdentity,
    SmtpConfig,
    SmtpMailer,
    links_router,
)
from store.mail import SqlMailLog

log = logging.getLogger("pizzabot.email")

_DESK = "email_links"


def enabled(settings: Settings) -> bool:
    return bool(settings.email_from and settings.smtp_host)


def _desk(request: Request) -> LinkDesk | None:
    services = getattr(request.app.state, "services", None)
    if services is None:
        return None
    desk = services.extras.get(_DESK)
    return desk if isinstance(desk, LinkDesk) else None


def install(app: FastAPI, settings: Settings) -> None:
    if enabled(settings):
        app.include_router(links_router(_desk))


def _secret(value: object) -> str | None:
    get = getattr(value, "get_secret_value", None)
    return str(get()) if get is not None else None


async def start(svc: Services, app: FastAPI) -> None:
    from bot.server import add_channel

    s = svc.settings
    if not enabled(s) or s.email_from is None or s.smtp_host is None:
        return
    identity = MailIdentity(
        address=s.email_from.strip().lower(),
        name=s.email_from_name,
        plus_address=s.email_plus_address,
    )
    mailer = SmtpMailer(
        SmtpConfig(
            host=s.smtp_host,
            port=s.smtp_port,
            tls=s.smtp_tls,
            user=s.smtp_user,
            password=_secret(s.smtp_password),
            timeout=s.smtp_timeout,
        )
    )
    channel = EmailChannel(
        mailer=mailer,
        identity=identity,
        store=svc.store,
        skills=svc.ctx.skills,
        public_url=s.public_url,
        link_ttl=s.email_link_ttl,
        clock=svc.ctx.clock,
    )
    add_channel(svc, channel)
    mail_log = SqlMailLog(svc.store.engine)
    svc.extras[_DESK] = LinkDesk(
        store=svc.store, inbox=svc.inbox, log=mail_log, clock=svc.ctx.clock
    )
    svc.extras["email_channel"] = channel
    log.info("Email: sending as %s via %s:%s", identity.address, s.smtp_host, s.smtp_port)
    for skill in svc.ctx.skills.all():
        if skill.deliver.email and not skill.approvers.email:
            log.warning(
                "Email: skill %s mails items but has no approvers.email: "
                "nobody can decide its items by mail",
                skill.name,
            )
    if not s.imap_host:
        log.info("email: sending only (set PIZZABOT_IMAP_HOST to read replies)")
        return
    handler = MailHandler(
        store=svc.store,
        inbox=svc.inbox,
        runs=svc.runs,
        skills=svc.ctx.skills,
        log=mail_log,
        answerer=channel,
        identity=identity,
        config=InboundConfig(
            allowed_senders=frozenset(a.lower() for a in s.email_allowed_senders),
            default_skill=s.email_default_skill,
            authserv_id=s.email_authserv_id,
            max_bytes=s.email_max_bytes,
        ),
        clock=svc.ctx.clock,
    )
    receiver = ImapReceiver(
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
    )
    svc.extras["email_receiver"] = receiver
    log.info("Email: reading replies from %s:%s/%s", s.imap_host, s.imap_port, s.imap_folder)
    svc.spawn_singleton("email-receiver", receiver.run_forever)
