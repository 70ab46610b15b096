"""The channels part of `pizzabot bench`: from a person's decision arriving on a channel to the
approved tool's body running, end to end through a real `pizzabot serve`.

- Slack: a signed `block_actions` POST (the card's Approve button) to `/slack/events` (HTTP
  mode) → the tool body's own clock. Slack's Web API is a recorder on loopback that answers as
  Slack does; the button's value is read from the card the server posted there.
- Web: the item page's form POST (`/items/{id}/approve`, a signed-in session and its CSRF
  token) → the tool body.
- A request's long-poll: `GET /api/requests/{id}?wait=` is waiting when the decision is POSTed
  to the API; decision POST sent → the long-poll answered.
- Email: the approver's reply to the item's mail (`bench.channels_email`), accepted by the
  SMTP server (its answer to DATA) → the tool body. The bot's IMAP receiver IDLEs on a real
  dovecot (`tests.peers.mailpeer`); without dovecot this figure is skipped, the others still run.

The tool body's clock comes from the echo tool's log (`BENCH_TOOLS_LOG`), one line per call
with its tag.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import re
import signal
import socket
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

import httpx
import yaml
from rich.console import Console

from bench.engine import child_env, free_port, percentile
from bench.model import ModelProcess
from bench.procs import Child, _wait_answer
from bench.tools import LOG_ENV

if TYPE_CHECKING:
    from bench.channels_email import Approver
    from tests.peers.mailpeer import MailServer

APPROVER = "UBENCH01"
APPROVE_ACTION = "pizza_approve"  # the card's Approve button (channels.slack.cards.APPROVE)


class SlackRecorder:
    """Slack's Web API on loopback: answers what the server calls, keeps chat.postMessage
    calls (the cards) so the bench can press their buttons, and when each chat.update came."""

    def __init__(self) -> None:
        self.cards: list[dict[str, Any]] = []
        #: (perf_counter at arrival, the updated message's ts), for the fan-out figure.
        self.updates: list[tuple[float, str]] = []
        self._ts = itertools.count(1)
        self.url = ""
        self._server: Any = None
        self._task: asyncio.Task[None] | None = None

    async def _api(self, request: Any) -> Any:
        from starlette.responses import JSONResponse

        method = request.path_params["method"]
        args: dict[str, Any] = dict(request.query_params)
        if request.headers.get("content-type", "").startswith("application/json"):
            args.update(await request.json())
        else:
            args.update(dict(await request.form()))
        answer: dict[str, Any] = {"ok": True}
        if method == "auth.test":
            answer |= {"team_id": "TBENCH", "user_id": "UBOT", "bot_id": "BBOT", "team": "b"}
        elif method == "chat.postMessage":
            ts = f"{1_700_000_000 + next(self._ts)}.000100"
            answer |= {"channel": str(args.get("channel")), "ts": ts}
            blocks = args.get("blocks")
            if isinstance(blocks, str):
                blocks = json.loads(blocks)
            self.cards.append({"channel": str(args.get("channel")), "ts": ts, "blocks": blocks})
        elif method == "chat.update":
            self.updates.append((time.perf_counter(), str(args.get("ts"))))
            answer |= {"channel": args.get("channel"), "ts": args.get("ts")}
        elif method == "conversations.open":
            answer |= {"channel": {"id": "D" + str(args.get("users", "")).split(",")[0]}}
        elif method in ("views.open", "views.publish"):
            answer |= {"view": {"id": "VBENCH"}}
        return JSONResponse(answer)

    async def __aenter__(self) -> SlackRecorder:
        import uvicorn
        from starlette.applications import Starlette
        from starlette.routing import Route

        app = Starlette(routes=[Route("/api/{method}", self._api, methods=["GET", "POST"])])
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{sock.getsockname()[1]}/api/"
        config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off")
        self._server = uvicorn.Server(config)
        self._task = asyncio.create_task(self._server.serve(sockets=[sock]))
        while not self._server.started:
            if self._task.done():
                await self._task
            await asyncio.sleep(0.01)
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._server.should_exit = True
        if self._task is not None:
            await self._task

    def approve_button(self, item_id: str) -> dict[str, Any] | None:
        """The card for `item_id` (channel, ts, and its Approve button's value: the item and
        the card's digest) if the server has posted it."""
        for card in self.cards:
            for block in card["blocks"] or []:
                for element in block.get("elements", []) if isinstance(block, dict) else []:
                    value = str(element.get("value") or "")
                    if (
                        element.get("action_id") == APPROVE_ACTION
                        and value.partition(":")[0] == item_id
                    ):
                        return {**card, "value": value}
        return None


def block_actions(item_id: str, card: dict[str, Any]) -> dict[str, Any]:
    """A click on the card's Approve button, as Slack posts it (the button's own value)."""
    return {
        "type": "block_actions",
        "user": {"id": APPROVER, "username": "bench", "name": "bench", "team_id": "TBENCH"},
        "api_app_id": "ABENCH",
        "token": "legacy",
        "container": {"type": "message", "message_ts": card["ts"], "channel_id": card["channel"]},
        "trigger_id": f"{int(time.time())}.1.{uuid.uuid4().hex}",
        "team": {"id": "TBENCH", "domain": "bench"},
        "channel": {"id": card["channel"], "name": "bench"},
        "message": {"type": "message", "ts": card["ts"], "text": "…", "blocks": []},
        "state": {"values": {}},
        "response_url": "http://127.0.0.1:9/respond",
        "actions": [
            {
                "action_id": APPROVE_ACTION,
                "block_id": f"decide:{item_id}",
                "value": card["value"],
                "type": "button",
                "action_ts": f"{time.time():.6f}",
            }
        ],
    }


def signed(secret: str, body: str) -> dict[str, str]:
    from slack_sdk.signature import SignatureVerifier

    ts = str(int(time.time()))
    return {
        "X-Slack-Request-Timestamp": ts,
        "X-Slack-Signature": SignatureVerifier(secret).generate_signature(timestamp=ts, body=body)
        or "",
        "Content-Type": "application/x-www-form-urlencoded",
    }


class ToolsLog:
    """The echo tool's log: when each tagged call's body ran."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._offset = 0
        self.seen: dict[str, float] = {}

    def _read(self) -> None:
        if not self.path.exists():
            return
        with open(self.path, encoding="utf-8") as f:
            f.seek(self._offset)
            chunk = f.read()
        # Only whole lines: a line being written is read next time.
        whole = chunk[: chunk.rfind("\n") + 1]
        self._offset += len(whole.encode())
        for line in whole.splitlines():
            data = json.loads(line)
            self.seen[data["tag"]] = data["t"]

    async def body_at(self, tag: str, timeout: float = 30.0) -> float:
        deadline = time.monotonic() + timeout
        while tag not in self.seen:
            self._read()
            if time.monotonic() > deadline:
                raise TimeoutError(f"the tool body of {tag} never ran")
            if tag not in self.seen:
                await asyncio.sleep(0.001)
        return self.seen[tag]


def _write_skills(
    folder: Path, model: ModelProcess, tools_log: Path, approver_mail: str | None
) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    skill = {
        "name": "bench-channels",
        "description": "pizzabot bench: echo calls decided on a channel",
        "instructions": "Call the echo tool as asked, then answer.",
        "model": "openai/bench",
        "model_options": {"api_base": model.openai_base, "api_key": "bench"},
        "mcp_servers": {
            "bench": {
                "command": "python",
                "args": ["-m", "bench.tools"],
                "env": {LOG_ENV: str(tools_log)},
            }
        },
        "tools": {"bench.echo": "ask"},
        "approvers": {"slack": [APPROVER]},
        "deliver": {"slack": "CBENCH01"},
    }
    requests = {
        "name": "bench-requests",
        "description": "pizzabot bench: approvals asked through the requests API",
        "tools": {"bench.deploy": "ask"},
    }
    (folder / "bench-channels.yaml").write_text(yaml.safe_dump(skill, sort_keys=False))
    if approver_mail is not None:
        by_mail = skill | {
            "name": "bench-email",
            "description": "pizzabot bench: echo calls decided by a reply to the item's mail",
            "approvers": {"email": [approver_mail]},
            "deliver": {"email": [approver_mail]},
        }
        (folder / "bench-email.yaml").write_text(yaml.safe_dump(by_mail, sort_keys=False))
    (folder / "bench-requests.yaml").write_text(yaml.safe_dump(requests, sort_keys=False))


@contextlib.asynccontextmanager
async def _server(
    work: Path, skills: Path, slack: SlackRecorder, secret: str, token: str, mail: dict[str, str]
) -> AsyncIterator[str]:
    port = free_port()
    child = Child(
        name="serve-channels",
        args=["serve"],
        env=child_env(
            {
                "PIZZABOT_DATA_DIR": str(work / "serve-channels"),
                "PIZZABOT_SKILLS_DIR": str(skills),
                "PIZZABOT_PORT": str(port),
                "PIZZABOT_API_TOKEN": token,
                "PIZZABOT_PUBLIC_URL": f"http://127.0.0.1:{port}",
                "PIZZABOT_SLACK_MODE": "http",
                "PIZZABOT_SLACK_BOT_TOKEN": "xoxb-bench",
                "PIZZABOT_SLACK_SIGNING_SECRET": secret,
                "PIZZABOT_SLACK_API_URL": slack.url,
                **mail,
            }
        ),
        log=work / "serve-channels.log",
    )
    base = f"http://127.0.0.1:{port}"
    child.start()
    try:
        await _wait_answer(child, f"{base}/readyz", "/readyz")
        yield base
    finally:
        child.stop(signal.SIGTERM)


async def _pending_item(api: httpx.AsyncClient, run_id: str, timeout: float = 60.0) -> str:
    deadline = time.monotonic() + timeout
    while True:
        items = (await api.get("/api/inbox", params={"box": "action"})).json()["items"]
        for item in items:
            if item["run_id"] == run_id and item["status"] == "pending":
                return str(item["id"])
        if time.monotonic() > deadline:
            raise TimeoutError(f"run {run_id} never asked for a decision")
        await asyncio.sleep(0.02)


async def _ask(api: httpx.AsyncClient, tag: str, skill: str = "bench-channels") -> str:
    r = await api.post("/api/runs", json={"skill": skill, "input": f"bench {tag} 1"})
    r.raise_for_status()
    return await _pending_item(api, r.json()["id"])


async def _slack_one(
    api: httpx.AsyncClient, base: str, slack: SlackRecorder, secret: str, log: ToolsLog, k: int
) -> float:
    tag = f"sl{k}"
    item_id = await _ask(api, tag)
    deadline = time.monotonic() + 30
    while (card := slack.approve_button(item_id)) is None:
        if time.monotonic() > deadline:
            raise TimeoutError(f"no Slack card for {item_id}")
        await asyncio.sleep(0.01)
    body = urlencode({"payload": json.dumps(block_actions(item_id, card))})
    headers = signed(secret, body)
    began = time.time()
    r = await api.post(f"{base}/slack/events", content=body.encode(), headers=headers)
    r.raise_for_status()
    return (await log.body_at(tag) - began) * 1000


async def _web_one(web: httpx.AsyncClient, api: httpx.AsyncClient, log: ToolsLog, k: int) -> float:
    tag = f"web{k}"
    item_id = await _ask(api, tag)
    page = await web.get(f"/items/{item_id}")
    match = re.search(r'name="csrf" value="([^"]+)"', page.text)
    if match is None:
        raise RuntimeError(f"no CSRF token on the item page ({page.status_code})")
    began = time.time()
    r = await web.post(f"/items/{item_id}/approve", data={"csrf": match.group(1)})
    if r.status_code >= 400:
        raise RuntimeError(f"the web form POST answered {r.status_code}")
    return (await log.body_at(tag) - began) * 1000


async def _email_one(
    api: httpx.AsyncClient, approver: Approver, log: ToolsLog, k: int
) -> tuple[float, float]:
    """(reply accepted by SMTP → tool body, the reply's submission), in ms."""
    tag = f"em{k}"
    item_id = await _ask(api, tag, skill="bench-email")
    card = await approver.card(item_id)
    accepted, submit_ms = await approver.answer(card, "approve")
    return (await log.body_at(tag) - accepted) * 1000, submit_ms


async def _long_poll_one(api: httpx.AsyncClient, k: int) -> tuple[float, float, float]:
    r = await api.post(
        "/api/requests",
        json={
            "skill": "bench-requests",
            "title": f"bench {k}",
            "tool": "bench.deploy",
            "args": {"k": k},
        },
    )
    r.raise_for_status()
    state = r.json()
    waiting = asyncio.create_task(api.get(f"/api/requests/{state['id']}", params={"wait": 30}))
    # The long-poll must be parked on the server before the decision: its request is sent and
    # read well within this (a wake-up missed would show as the whole 30 s wait).
    await asyncio.sleep(0.1)
    began = time.perf_counter()
    d = await api.post(f"/api/items/{state['item_id']}/decision", json={"decision": "approve"})
    decided = time.perf_counter()
    d.raise_for_status()
    answer = await waiting
    woke = time.perf_counter()
    if answer.json()["status"] == "pending":
        raise RuntimeError("the long-poll ended without the decision")
    return (woke - began) * 1000, (decided - began) * 1000, (woke - decided) * 1000


def _mail_missing() -> str | None:
    """Why the email figure cannot be measured here, or None."""
    try:
        from bench import channels_email
    except ImportError as exc:
        return f"{exc.name} is missing: pip install -r requirements-dev.lock"
    return channels_email.missing()


@contextlib.asynccontextmanager
async def _mail_peer() -> AsyncIterator[MailServer | None]:
    """The mail server for the email figure, or None (said on stderr) where it cannot run."""
    reason = _mail_missing()
    if reason is not None:
        Console(stderr=True).print(
            f"[yellow]bench: email figure skipped:[/] {reason}", soft_wrap=True
        )
        yield None
        return
    from bench import channels_email

    async with channels_email.peer() as mail:
        yield mail


async def _email_ms(
    api: httpx.AsyncClient, mail: MailServer, log: ToolsLog, samples: int
) -> dict[str, Any]:
    from bench.channels_email import Approver

    async with Approver(mail) as approver:
        # Not timed: the first decision by mail starts the run's MCP server.
        await _email_one(api, approver, log, -1)
        timed = [await _email_one(api, approver, log, k) for k in range(samples)]
    return {
        "email_p50_ms": percentile([t for t, _ in timed], 50),
        "email_p99_ms": percentile([t for t, _ in timed], 99),
        # The approver's side before that: connect, EHLO, MAIL, RCPT, DATA.
        "email_submit_p50_ms": percentile([s for _, s in timed], 50),
    }


async def bench_channels(model: ModelProcess, work: Path, samples: int) -> dict[str, Any]:
    """Slack click, web form, long-poll and email reply, `samples` decisions each, one at a
    time. Without dovecot the email figure is left out (`email_skipped` says why)."""
    skills, tools_log = work / "skills-channels", work / "channels-tools.jsonl"
    secret, token = "bench-signing-" + uuid.uuid4().hex, "bench-token-" + uuid.uuid4().hex
    log = ToolsLog(tools_log)
    auth = {"Authorization": f"Bearer {token}"}
    # Idle connections are dropped well before the server's keep-alive time-out closes them,
    # so a request is never sent on a connection the server is closing at that moment.
    limits = httpx.Limits(keepalive_expiry=1.0)
    async with _mail_peer() as mail, SlackRecorder() as slack:
        mail_env: dict[str, str] = {}
        if mail is not None:
            from bench.channels_email import APPROVER, server_env

            mail_env = server_env(mail)
        _write_skills(skills, model, tools_log, mail.address(APPROVER) if mail else None)
        async with (
            _server(work, skills, slack, secret, token, mail_env) as base,
            httpx.AsyncClient(base_url=base, headers=auth, timeout=60, limits=limits) as api,
            httpx.AsyncClient(base_url=base, timeout=60, limits=limits) as web,
        ):
            r = await web.get("/login", params={"token": token})
            if r.status_code >= 400:
                raise RuntimeError(f"web login answered {r.status_code}")
            # Not timed: the first run imports the model client and starts the MCP server.
            await _slack_one(api, base, slack, secret, log, -1)
            slack_ms = [await _slack_one(api, base, slack, secret, log, k) for k in range(samples)]
            web_ms = [await _web_one(web, api, log, k) for k in range(samples)]
            polls = [await _long_poll_one(api, k) for k in range(samples)]
            by_mail: dict[str, Any] = {"email_skipped": _mail_missing()}
            if mail is not None:
                by_mail = await _email_ms(api, mail, log, samples)
            await model.forget()
    woke = [w for w, _, _ in polls]
    return {
        "samples": samples,
        "slack_p50_ms": percentile(slack_ms, 50),
        "slack_p99_ms": percentile(slack_ms, 99),
        "web_p50_ms": percentile(web_ms, 50),
        "web_p99_ms": percentile(web_ms, 99),
        "long_poll_p50_ms": percentile(woke, 50),
        "long_poll_p99_ms": percentile(woke, 99),
        "decision_post_p50_ms": percentile([d for _, d, _ in polls], 50),
        # The long-poll's answer after the decision POST's own (both on loopback).
        "long_poll_after_decision_p50_ms": percentile([a for _, _, a in polls], 50),
        **by_mail,
    }
