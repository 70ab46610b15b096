"""What one composition root means for someone running Pizza Bot: a `pizzabot worker`
process addresses its cards to the channels the servers deliver on, and Slack and email ask
one and the same policy.

These build the parts the way `pizzabot serve` and `pizzabot worker` do (`pizzabot.bot.server.build`
from `Settings`), with the scripted model server and the test MCP server behind the skill.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import SecretStr

from pizzabot.agent.model import Box, DeliveryStatus, Item
from pizzabot.agent.policy import Principal
from pizzabot.agent.testing.model_server import ScriptedModelServer
from pizzabot.bot.server import build, shutdown, start_worker
from pizzabot.bot.services import Services
from pizzabot.bot.settings import Settings
from tests.peers.stack import _merge, default_skill
from tests.peers.stories import send_then_summarise
from tests.waiting import eventually

ALICE = "alice@example.test"


@pytest.fixture(autouse=True)
def _no_pizzabot_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """The settings here are the test's own, whatever the shell running the tests sets."""
    for name in [n for n in os.environ if n.startswith("PIZZABOT_")]:
        monkeypatch.delenv(name)


def _settings(root: Path, **over: Any) -> Settings:
    fields: dict[str, Any] = {
        "data_dir": root / "data",
        "skills_dir": root / "skills",
        "slack_bot_token": SecretStr("xoxb-test"),
        "slack_app_token": SecretStr("xapp-test"),
        "slack_api_url": "http://127.0.0.1:9/api/",  # never reached: nothing is sent here
        "email_from": "bot@example.test",
        "smtp_host": "127.0.0.1",
        "smtp_port": 9,
        "email_allowed_senders": [ALICE],
        "poll_interval": 0.05,
        "otel": False,
        "skills_watch": 0,
    }
    return Settings(**(fields | over))


@contextlib.asynccontextmanager
async def _built(settings: Settings, *, serving: bool) -> AsyncIterator[Services]:
    svc = await build(settings, token="t" * 32, with_worker=not serving, serving=serving)
    try:
        yield svc
    finally:
        await shutdown(svc)


async def _action(svc: Services, run_id: str) -> Item:
    items = await eventually(
        lambda: svc.store.list_items(run_id=run_id, box=Box.ACTION),
        what=f"an action item for run {run_id}",
        timeout=60,
    )
    return items[0]


async def test_a_worker_process_addresses_cards_to_the_servers_channels(
    tmp_path: Path,
) -> None:
    """A worker delivers nothing itself; the card it makes waits in the outbox for the
    server's Slack and email, as it would had the server's own worker made it."""
    async with ScriptedModelServer(send_then_summarise) as model:
        skill = _merge(
            default_skill(model.openai_base, tools_log=tmp_path / "tools.jsonl"),
            {"deliver": {"slack": "#ops", "email": [ALICE]}},
        )
        (tmp_path / "skills").mkdir()
        (tmp_path / "skills" / "test.yaml").write_text(yaml.safe_dump(skill))
        async with _built(_settings(tmp_path), serving=False) as worker:
            assert worker.slack is None and worker.email is None and worker.triggers is None
            assert worker.dispatcher.channels == {}
            assert worker.worker is not None
            start_worker(worker, worker.worker)
            run = await worker.runs.start("test", "mail Ann the quote", by=Principal.owner("api"))
            item = await _action(worker, run.id)
            deliveries = await worker.store.deliveries(item.id)
    assert sorted((d.channel, d.address) for d in deliveries) == [
        ("email", ALICE),
        ("push", "subscribers"),
        ("slack", "#ops"),
    ]
    assert {d.status for d in deliveries} == {DeliveryStatus.PENDING}


async def test_a_worker_addresses_no_channel_the_settings_leave_off(tmp_path: Path) -> None:
    """Slack in HTTP mode without its signing secret is off on the server: a worker does not
    address cards to it either (they would wait for ever)."""
    (tmp_path / "skills").mkdir()
    settings = _settings(tmp_path, slack_mode="http", email_from=None)
    async with _built(settings, serving=False) as worker:
        assert worker.ctx.channels == frozenset({"push"})  # Web Push needs no setting


async def test_slack_and_email_ask_one_policy(tmp_path: Path) -> None:
    (tmp_path / "skills").mkdir()
    async with _built(_settings(tmp_path, imap_host="127.0.0.1"), serving=True) as server:
        assert server.slack is not None and server.email is not None
        assert server.slack.home.inbound.access is server.access
        assert server.email.channel.access is server.access
        assert server.ctx.channels == frozenset({"slack", "email", "push"})
        # The outbox also posts requests' callbacks, which no item is addressed to.
        assert set(server.dispatcher.channels) == {"slack", "email", "push", "callback"}
        # The one policy was given the allowed senders: a stranger may not start a run.
        assert server.access.may_start(Principal.of("email", ALICE))
        assert not server.access.may_start(Principal.of("email", "mallory@example.test"))
        # The engine asks the same policy the channels do.
        assert server.ctx.access is server.access
