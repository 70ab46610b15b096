"""Plugs the web inbox (channels/web) into the app: its routes, at creation.

The web routes take their services per request through the `WebSite` made here (they exist
only once the lifespan has started), so nothing needs stashing at start, and the web page
has no loop of its own to start.
"""

from __future__ import annotations

from fastapi import FastAPI, Request

from pizzabot.bot.services import Services
from pizzabot.bot.settings import Settings
from pizzabot.channels.web import WebDeps, WebSite
from pizzabot.channels.web import install as install_web
from pizzabot.channels.web.mail_signin import MailSignIn
from pizzabot.store.phone import SqlPasskeys
from pizzabot.store.web_sessions import SqlSessionEnds


def _deps(request: Request) -> WebDeps:
    svc: Services = request.app.state.services
    triggers = svc.triggers
    return WebDeps(
        store=svc.store,
        inbox=svc.inbox,
        runs=svc.runs,
        skills=svc.ctx.skills,
        token=svc.token,
        ended=SqlSessionEnds(svc.store),
        schedules=triggers.scheduler.list_json if triggers is not None else None,
        grants=svc.ctx.grants,
        tokens=svc.tokens,
        access=svc.access,
        phone=svc.phone,
        mail_signin=_mail_signin(svc),
        live=svc.live,
        history=svc.store,
    )


def _mail_signin(svc: Services) -> MailSignIn | None:
    """Sign-in links by mail, where this server sends mail; the link's one-time row is kept
    with the passkeys' ceremonies."""
    if svc.email is None:
        return None
    return MailSignIn(
        skills=svc.ctx.skills,
        ceremonies=SqlPasskeys(svc.store.db),
        trail=svc.store,
        mailer=svc.email.channel,
        base_url=svc.settings.base_url,
    )


def install(app: FastAPI, settings: Settings) -> None:
    site = WebSite(
        _deps,
        secure_cookie=settings.base_url.startswith("https://"),
        login_max_failures=settings.web_login_max_failures,
        login_window=settings.web_login_window,
    )
    install_web(app, site)
