"""A delivery's error that echoes the bot token is stored and logged without it.

When Slack (or an SMTP server) refuses a message, the outbox keeps the answer as the
delivery's last error and logs it. Such an answer can repeat the credential it was given.
Here a real server process posts to Slack's Web API played by a local recorder that refuses
every message with an error echoing the bot token and the Authorization header it got. The
token is shaped like no well-known key, so only the server's own secret values catch it:
the error the store keeps, and the server's log, must not hold it.
"""

from __future__ import annotations

from pathlib import Path

from pizzabot.agent.model import Delivery
from pizzabot.store.sql import SqlStore, connect
from tests.peers.server import TOKEN
from tests.peers.slack_api import SlackApi
from tests.peers.stack import Stack
from tests.peers.stories import send_then_summarise
from tests.waiting import eventually

BOT_TOKEN = "pz-slack-bot-7Qm2Xc9Lw4Rt8Vb1"


async def _failed_delivery(store: SqlStore, item_id: str, timeout: float = 30) -> Delivery:
    async def failed() -> Delivery | None:
        deliveries = await store.deliveries(item_id)
        return next((d for d in deliveries if d.channel == "slack" and d.last_error), None)

    return await eventually(
        failed,
        what=f"a failed Slack delivery for item {item_id}",
        timeout=timeout,
        interval=0.1,
    )


async def test_a_slack_error_echoing_the_token_is_stored_without_it(tmp_path: Path) -> None:
    async with SlackApi() as slack:
        echo = f"invalid_auth: token {BOT_TOKEN} (Authorization: Bearer {BOT_TOKEN})"
        slack.fail_next(1000, status=200, methods={"chat.postMessage"}, error=echo)
        env = {
            "PIZZABOT_SLACK_MODE": "http",
            "PIZZABOT_SLACK_BOT_TOKEN": BOT_TOKEN,
            "PIZZABOT_SLACK_SIGNING_SECRET": "8f742231b10e8888abcd99yyyzzz85a5",
            "PIZZABOT_SLACK_API_URL": slack.url,
        }
        skill = {"deliver": {"slack": "C123"}, "approvers": {"slack": ["U1"]}}
        async with Stack(tmp_path, script=send_then_summarise, skill=skill, env=env) as st:
            run = await st.start_run("test", "mail Ann the quote")
            item = await st.wait_item(run["id"])
            store = SqlStore(connect(f"sqlite+aiosqlite:///{st.server.data_dir / 'pizzabot.db'}"))
            try:
                delivery = await _failed_delivery(store, item["id"])
            finally:
                await store.engine.dispose()
            log = st.server.log()

    # The recorder really answered with the token, and that answer is what failed the post.
    refused = [c for c in slack.calls if c.method == "chat.postMessage" and c.status == 200]
    assert refused and all(c.token == BOT_TOKEN for c in refused)
    assert delivery.last_error is not None
    assert "invalid_auth" in delivery.last_error and "[redacted]" in delivery.last_error
    assert BOT_TOKEN not in delivery.last_error
    assert "delivery" in log and "invalid_auth" in log
    for secret in (BOT_TOKEN, TOKEN):
        assert secret not in log
