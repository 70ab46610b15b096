"""The fan-out part of `pizzabot bench`: a decision made in one place → every other copy of
the card shows it, through a real `pizzabot serve` with Slack, email and the web page on.

Each request's card goes to a Slack channel (Slack's Web API is `bench.channels.SlackRecorder`
on loopback) and to an approver's mailbox (an SMTP server on loopback that keeps what it is
sent, so no mail server is needed), and is open on the web page. While `waiting` other requests
wait on a decision, `samples` requests are decided one at a time through the API, and from the
decision POST sent the bench times:
- Slack: the card's `chat.update` arriving at the recorder;
- web: the page's live region for the item (`/items/{id}/state`, long-polled as
  `static/live.js` does, with the fingerprint of what it shows) answered with the new state;
- email: the note of the outcome mailed into the card's thread, received by the SMTP server;
- all: the last of the three.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import yaml

from bench.channels import APPROVER, SlackRecorder
from bench.engine import child_env, free_port, percentile
from bench.procs import Child, _wait_answer

SKILL = "bench-fanout"
MAILBOX = "approver@bench.test"
#: Requests made at once while the crowd is built.
_AT_ONCE = 50
#: The live region's ask (`static/live.js` sends this header).
_LIVE = {"Accept": "text/html", "X-Requested-With": "live"}


class MailSink:
    """An SMTP server on loopback that accepts every mail and notes when each arrived."""

    def __init__(self) -> None:
        self.arrived: list[float] = []
        self.port = free_port()
        self._controller: Any = None

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        self.arrived.append(time.perf_counter())
        return "250 OK"

    async def __aenter__(self) -> MailSink:
        from aiosmtpd.controller import Controller

        self._controller = Controller(self, hostname="127.0.0.1", port=self.port)
        await asyncio.to_thread(self._controller.start)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await asyncio.to_thread(self._controller.stop)


def _write_skill(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    skill = {
        "name": SKILL,
        "description": "pizzabot bench: a request's card on Slack, by mail and on the web",
        "tools": {"bench.deploy": "ask"},
        "approvers": {"slack": [APPROVER], "email": [MAILBOX]},
        "deliver": {"slack": "CBENCH01", "email": [MAILBOX]},
    }
    (folder / f"{SKILL}.yaml").write_text(yaml.safe_dump(skill, sort_keys=False))


@contextlib.asynccontextmanager
async def _server(
    work: Path, slack: SlackRecorder, mail: MailSink, token: str
) -> AsyncIterator[str]:
    skills = work / "skills-fanout"
    _write_skill(skills)
    port = free_port()
    env = {
        "PIZZABOT_DATA_DIR": str(work / "serve-fanout"),
        "PIZZABOT_SKILLS_DIR": str(skills),
        "PIZZABOT_PORT": str(port),
        "PIZZABOT_API_TOKEN": token,
        "PIZZABOT_PUBLIC_URL": f"http://127.0.0.1:{port}",
        "PIZZABOT_SLACK_MODE": "http",
        "PIZZABOT_SLACK_BOT_TOKEN": "xoxb-bench",
        "PIZZABOT_SLACK_SIGNING_SECRET": "bench-signing-" + uuid.uuid4().hex,
        "PIZZABOT_SLACK_API_URL": slack.url,
        "PIZZABOT_EMAIL_FROM": "bot@bench.test",
        "PIZZABOT_SMTP_HOST": "127.0.0.1",
        "PIZZABOT_SMTP_PORT": str(mail.port),
        "PIZZABOT_SMTP_TLS": "none",
    }
    child = Child("serve-fanout", ["serve"], child_env(env), work / "serve-fanout.log")
    base = f"http://127.0.0.1:{port}"
    child.start()
    try:
        await _wait_answer(child, f"{base}/readyz", "/readyz")
        yield base
    finally:
        child.stop(signal.SIGTERM)


async def _until(what: str, done: Any, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            raise TimeoutError(f"fan-out: {what}")
        await asyncio.sleep(0.005)


async def _ask(api: httpx.AsyncClient, tag: str) -> str:
    body = {"skill": SKILL, "title": tag, "tool": "bench.deploy", "args": {"k": tag}}
    r = await api.post("/api/requests", json=body)
    r.raise_for_status()
    return str(r.json()["item_id"])


async def _crowd(api: httpx.AsyncClient, slack: SlackRecorder, mail: MailSink, n: int) -> None:
    """`n` requests waiting, each card delivered to Slack and by mail before the timing."""
    for start in range(0, n, _AT_ONCE):
        await asyncio.gather(
            *(_ask(api, f"crowd {k}") for k in range(start, min(n, start + _AT_ONCE)))
        )
    await _until(
        f"{n} cards delivered", lambda: len(slack.cards) >= n and len(mail.arrived) >= n, 600
    )


async def _one(
    api: httpx.AsyncClient, web: httpx.AsyncClient, slack: SlackRecorder, mail: MailSink, k: int
) -> dict[str, float]:
    """One decision through the API → each copy updated, in ms from the decision POST sent."""
    cards, mails = len(slack.cards), len(mail.arrived)
    item_id = await _ask(api, f"timed {k}")
    await _until(
        "the card on Slack and by mail",
        lambda: len(slack.cards) > cards and len(mail.arrived) > mails,
    )
    card = slack.approve_button(item_id)
    if card is None:
        raise RuntimeError(f"no Slack card for {item_id}")
    state = await web.get(f"/items/{item_id}/state", headers=_LIVE)
    state.raise_for_status()
    seen = state.headers["X-Live-Version"]
    held = asyncio.create_task(
        web.get(f"/items/{item_id}/state", params={"seen": seen, "wait": 30}, headers=_LIVE)
    )
    await asyncio.sleep(0.1)  # the live region's ask is held on the server
    updates, notes = len(slack.updates), len(mail.arrived)
    began = time.perf_counter()
    d = await api.post(f"/api/items/{item_id}/decision", json={"decision": "approve"})
    d.raise_for_status()
    posted = time.perf_counter()
    answer = await held
    web_at = time.perf_counter()
    if answer.status_code != 200 or answer.headers.get("X-Live-Version") == seen:
        raise RuntimeError(f"the live region was not refreshed ({answer.status_code})")
    await _until(
        "the Slack card's update",
        lambda: any(ts == card["ts"] for _, ts in slack.updates[updates:]),
    )
    await _until("the note in the mail thread", lambda: len(mail.arrived) > notes)
    slack_at = next(at for at, ts in slack.updates[updates:] if ts == card["ts"])
    ms = {"slack": slack_at, "web": web_at, "email": mail.arrived[notes]}
    out = {name: (at - began) * 1000 for name, at in ms.items()}
    out["all"] = max(out.values())
    out["decision_post"] = (posted - began) * 1000
    return out


async def bench_fanout(work: Path, waiting: int, samples: int) -> dict[str, Any]:
    """The figures above: p50 and p99 per copy and for the last of them."""
    token = "bench-token-" + uuid.uuid4().hex
    limits = httpx.Limits(keepalive_expiry=1.0)
    auth = {"Authorization": f"Bearer {token}"}
    async with (
        SlackRecorder() as slack,
        MailSink() as mail,
        _server(work, slack, mail, token) as base,
        httpx.AsyncClient(base_url=base, headers=auth, timeout=60, limits=limits) as api,
        httpx.AsyncClient(base_url=base, timeout=60, limits=limits) as web,
    ):
        r = await web.get("/login", params={"token": token})
        if r.status_code >= 400:
            raise RuntimeError(f"web login answered {r.status_code}")
        await _one(api, web, slack, mail, -1)  # not timed: warms the server's paths
        await _crowd(api, slack, mail, waiting)
        timed = [await _one(api, web, slack, mail, k) for k in range(samples)]
    out: dict[str, Any] = {"waiting": waiting, "samples": samples}
    for name in ("slack", "web", "email", "all", "decision_post"):
        out[f"{name}_p50_ms"] = percentile([t[name] for t in timed], 50)
        out[f"{name}_p99_ms"] = percentile([t[name] for t in timed], 99)
    return out
