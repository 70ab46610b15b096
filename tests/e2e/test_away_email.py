"""Away and delegation by mail, end to end: a real server and a real SMTP + IMAP server.
Alice approves deploys by mail; while she is away, mallory is her delegate: the card mailed
to alice goes to mallory instead, saying for whom, and mallory's reply decides it as
"mallory for alice"."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.test_email_e2e import ALICE, env, send, text_of
from tests.peers.email_bot import reply_to
from tests.peers.mailpeer import DEFAULT_USERS
from tests.peers.mailserver import MailServer
from tests.peers.required import require
from tests.peers.server import ServerProcess
from tests.waiting import eventually

pytestmark = pytest.mark.mail

MALLORY = "mallory@example.test"
SKILL = {
    "name": "deploys",
    "people": {"alice": {"email": ALICE}, "mallory": {"email": MALLORY}},
    "approvers": {"people": ["alice"]},
    "deliver": {"email": [ALICE]},
    "tools": {"deploy.prod": {"policy": "ask"}},
}


@pytest.fixture(scope="module")
def mail() -> Iterator[MailServer]:
    require("mail")
    with MailServer() as server:
        yield server


async def test_a_delegate_decides_by_mail_for_the_away_person(
    mail: MailServer, tmp_path: Path
) -> None:
    skills = tmp_path / "skills"
    skills.mkdir()
    (skills / "deploys.yaml").write_text(yaml.safe_dump(SKILL))
    server = ServerProcess(data_dir=tmp_path / "data", skills_dir=skills, env=env(mail))
    await server.start()
    try:
        async with server.client() as c:
            until = (datetime.now(UTC) + timedelta(hours=3)).isoformat()
            r = await c.post(
                "/api/away", json={"person": "alice", "delegate": "mallory", "until": until}
            )
            assert r.status_code == 200, r.text
            r = await c.post(
                "/api/requests",
                json={"skill": "deploys", "title": "Deploy 4.0", "tool": "deploy.prod"},
            )
            assert r.status_code == 201, r.text
            made = r.json()
            card = await mail.wait_for_mail(
                "mallory",
                DEFAULT_USERS["mallory"],
                lambda m: m["X-Pizzabot-Item"] == made["item_id"] and m["Reply-To"] is not None,
                timeout=30,
            )
            assert card["To"] == MALLORY
            assert "For alice, who is away until" in text_of(card)
            await send(mail, reply_to(card, "approve", sender=f"Mallory <{MALLORY}>"))

            async def approved() -> dict[str, Any] | None:
                state: dict[str, Any] = (await c.get(f"/api/requests/{made['id']}")).json()
                return state if state["status"] == "approved" else None

            state = await eventually(approved, what="mallory's approval for alice", timeout=30)
            assert (state["decided_by"], state["via"]) == ("mallory for alice", "email")
    finally:
        server.stop()
