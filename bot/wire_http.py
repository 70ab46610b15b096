"""Plugs the HTTP API (channels/http) into the app: its routes at creation, and what they
need from the running server (`ApiDeps`) once it has started."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI

from pizzabot.bot.services import Services
from pizzabot.bot.settings import environment
from pizzabot.channels import http


def install(app: FastAPI) -> None:
    http.install(app)


def deps(svc: Services) -> http.ApiDeps:
    """The API's view of the running server."""
    skills = svc.ctx.skills

    def callback_secret(skill: str) -> str | None:
        if skill not in skills:
            return None
        env = skills.get(skill).callback_secret_env
        return (environment().get(env) or None) if env else None

    async def status() -> dict[str, Any]:
        store, leaders = svc.store, svc.leaders
        dead = await store.dead_letters()
        return {
            "database": store.engine.dialect.name,
            "worker": svc.worker.name if svc.worker is not None else None,
            "leading": sorted(n for n, leader in leaders.items() if leader.leading)
            if store.is_postgres
            else sorted(t.get_name() for t in svc.background if not t.done()),
            "channels": sorted(svc.dispatcher.channels),
            "kill": await store.get_kill() is not None,
            "outbox": {"dead": sum(dead.values()), "dead_by_channel": dead},
            "mcp": svc.tools.running(),
        }

    return http.ApiDeps(
        store=svc.store,
        runs=svc.runs,
        inbox=svc.inbox,
        requests=svc.requests,
        access=svc.access,
        tokens=svc.token_desk,
        skills=skills,
        skill_folder=svc.skill_files,
        clock=svc.ctx.clock,
        callback_secret=callback_secret,
        status=status,
        grants=svc.ctx.grants,
        scheduler=svc.triggers.scheduler if svc.triggers is not None else None,
        push=svc.phone.subscriptions if svc.phone is not None else None,
        history=svc.store,
        mcp_auth=svc.tools.auth,
    )
