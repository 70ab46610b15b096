"""The web inbox in-process, for request-level tests: a real SqlStore on SQLite, the engine's
real Inbox and Runs, and the web router in a bare FastAPI app reached through httpx's
ASGITransport (no worker: runs stay where a test puts them). The app is made by
`pizzabot.channels.web.install`, as the server makes it.

    async with WebApp(tmp_path) as web:
        item = await web.action_item(schema=SCHEMA, args={...})
        async with web.client(logged_in=True) as c:
            page = await c.get(f"/items/{item.id}")
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from html.parser import HTMLParser
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx
from fastapi import FastAPI

from pizzabot.agent.context import Context
from pizzabot.agent.events import NewEvent, RunStarted
from pizzabot.agent.inbox import Inbox
from pizzabot.agent.model import Box, Item, ItemKind, ItemStatus, Risk, RunStatus
from pizzabot.agent.runs import Runs
from pizzabot.agent.skills import Approvers, Skill, SkillBook
from pizzabot.bot.core import build
from pizzabot.channels.web import WebDeps, WebSite, install
from pizzabot.store.migrate import upgrade
from pizzabot.store.sql import SqlStore, connect
from pizzabot.store.web_sessions import SqlSessionEnds

TOKEN = "web-test-token-abcdef"
T0 = datetime(2026, 1, 1, 9, 0, tzinfo=UTC)

SKILL = Skill(
    name="test",
    description="a skill for web tests",
    instructions="test",
    model="openai/none",
    approvers=Approvers(slack=["U123"]),
)


class WebApp:
    def __init__(
        self, root: Path, *, token: str = TOKEN, skill: Skill = SKILL, **site_options: Any
    ) -> None:
        """``site_options`` go to `WebSite` (a clock, the login throttle's limits)."""
        self.root = root
        self.token = token
        self.skill = skill
        self.site_options = site_options
        self.store: SqlStore
        self.ctx: Context
        self.inbox: Inbox
        self.runs: Runs
        self.deps: WebDeps
        self.app = FastAPI()
        self._n = 0

    async def __aenter__(self) -> WebApp:
        engine = connect(f"sqlite+aiosqlite:///{self.root / 'web.db'}")
        await upgrade(engine)
        self.store = SqlStore(engine)
        core = build(
            store=self.store,
            skills=SkillBook({self.skill.name: self.skill}),
            channels={},
            mind=None,
        )
        self.ctx, self.inbox, self.runs = core.ctx, core.inbox, core.runs
        self.deps = WebDeps(
            store=self.store,
            inbox=self.inbox,
            runs=self.runs,
            skills=self.ctx.skills,
            token=self.token,
            ended=SqlSessionEnds(self.store),
        )
        # Read per request, so a test may swap a service in (`dataclasses.replace`).
        install(self.app, WebSite(lambda _request: self.deps, **self.site_options))
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.store.aclose()

    def _id(self, prefix: str) -> str:
        self._n += 1
        return f"{prefix}{self._n:04d}"

    async def run(self, text: str = "mail Ann", status: RunStatus | None = None) -> str:
        run_id = self._id("run")
        await self.store.create_run(
            run_id=run_id,
            skill=self.skill.name,
            input=text,
            trigger="api",
            now=T0,
            events=[NewEvent(RunStarted(input=text, trigger="api", by="owner"))],
        )
        if status is not None:
            await self.store.set_status(run_id, RunStatus.RUNNING, lease=None, now=T0)
            if status is not RunStatus.RUNNING:
                await self.store.set_status(run_id, status, lease=None, now=T0)
        return run_id

    async def action_item(
        self,
        *,
        schema: dict[str, Any],
        args: dict[str, Any],
        kind: ItemKind = ItemKind.TOOL,
        body: str = "I will mail Ann.",
        risk: Risk | None = None,
        run_input: str = "mail Ann",
    ) -> Item:
        run_id = await self.run(run_input)
        name = self.skill.name
        await self.store.set_status(run_id, RunStatus.RUNNING, lease=None, now=T0)
        item = Item(
            id=self._id("item"),
            run_id=run_id,
            skill=name,
            box=Box.ACTION,
            kind=kind,
            status=ItemStatus.PENDING,
            title=f"{name} wants to run crm.send_email"
            if kind is ItemKind.TOOL
            else f"{name}: budget reached — extend or stop",
            body=body,
            created_at=T0,
            call_id="call1",
            tool="crm.send_email" if kind is ItemKind.TOOL else None,
            args=args,
            schema=schema if kind is ItemKind.TOOL else None,
            risk=risk or Risk(),
            secret="s",
        )
        return await self.store.create_item(
            item, targets=[], lease=None, now=T0, run_status=RunStatus.WAITING
        )

    async def unread_item(self, body: str = "All done.") -> Item:
        run_id = await self.run(status=RunStatus.DONE)
        item = Item(
            id=self._id("note"),
            run_id=run_id,
            skill=self.skill.name,
            box=Box.UNREAD,
            kind=ItemKind.RUN,
            status=ItemStatus.UNREAD,
            title=f"{self.skill.name} finished",
            body=body,
            created_at=T0,
            secret="s",
        )
        return await self.store.create_item(item, targets=[], lease=None, now=T0)

    @contextlib.asynccontextmanager
    async def client(self, *, logged_in: bool = False) -> AsyncIterator[httpx.AsyncClient]:
        transport = httpx.ASGITransport(app=self.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as c:
            if logged_in:
                r = await c.get("/login", params={"token": self.token})
                assert r.status_code == 303, r.text
            yield c


def csrf_of(html: str) -> str:
    """The CSRF token the page put in its forms."""
    match = re.search(r'name="csrf" value="([^"]+)"', html)
    assert match, "no CSRF token on the page"
    return match.group(1)


class Form(HTMLParser):
    """The controls of an HTML page, by name: enough to check what a form offers."""

    def __init__(self, html: str) -> None:
        super().__init__(convert_charrefs=True)
        self.controls: dict[str, dict[str, Any]] = {}
        self.labels: dict[str, str] = {}  # for= -> label text
        self.errors: list[str] = []
        self._select: str | None = None
        self._textarea: str | None = None
        self._label: str | None = None
        self._error = False
        self._option: dict[str, Any] | None = None
        self.feed(html)

    def label_of(self, name: str) -> str:
        """The text of the label that points at the control named ``name`` (by its id)."""
        return self.labels[self.controls[name]["id"]]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: (v if v is not None else "") for k, v in attrs}
        name = a.get("name")
        if tag == "input" and name:
            self.controls[name] = {"tag": "input", **a}
        elif tag == "select" and name:
            self.controls[name] = {"tag": "select", **a, "options": [], "selected": None}
            self._select = name
        elif tag == "option" and self._select:
            self._option = {"value": a.get("value", ""), "text": ""}
            self.controls[self._select]["options"].append(self._option)
            if "selected" in a:
                self.controls[self._select]["selected"] = a.get("value", "")
        elif tag == "textarea" and name:
            self.controls[name] = {"tag": "textarea", **a, "text": ""}
            self._textarea = name
        elif tag == "label":
            self._label = a.get("for", "")
            self.labels[self._label] = ""
        elif tag == "p" and "error" in a.get("class", "").split():
            self._error = True
            self.errors.append("")

    def handle_endtag(self, tag: str) -> None:
        if tag == "select":
            self._select = None
        elif tag == "option":
            self._option = None
        elif tag == "textarea":
            self._textarea = None
        elif tag == "label":
            self._label = None
        elif tag == "p":
            self._error = False

    def handle_data(self, data: str) -> None:
        if self._textarea:
            self.controls[self._textarea]["text"] += data
        if self._option is not None:
            self._option["text"] += data
        if self._label is not None:
            self.labels[self._label] += data
        if self._error:
            self.errors[-1] += data
