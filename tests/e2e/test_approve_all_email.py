"""Approve all by mail, end to end: a real `pizzabot serve` process, the scripted model, the
test MCP tools and a real SMTP + IMAP server. The model asks for three calls in one reply;
Alice answers one card's mail with "approve all": the two mails are approved, each on its own
and by her, and the lookup, which needs two people, is left out, as the answer in her thread
says."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.test_email_e2e import ALICE, answer_to, env, item_mail, send, text_of
from tests.peers.batch_stories import TWO_FOR_LOOKUP, pending_of, three_at_once
from tests.peers.email_bot import reply_to
from tests.peers.mailserver import MailServer
from tests.peers.required import require
from tests.peers.stack import Stack
from tests.waiting import eventually

pytestmark = pytest.mark.mail


@pytest.fixture(scope="module")
def mail() -> Iterator[MailServer]:
    require("mail")
    with MailServer() as server:
        yield server


SKILL = {"deliver": {"email": [ALICE]}, "approvers": {"email": [ALICE]}, **TWO_FOR_LOOKUP}


async def test_approve_all_by_mail_reply(mail: MailServer, tmp_path: Path) -> None:
    async with Stack(tmp_path, script=three_at_once, skill=SKILL, env=env(mail)) as st:
        run = await st.start_run("test", "mail two customers and look Ada up")
        await st.wait_item(run["id"], status="pending", count=3)
        async with st.client() as c:
            items = (await c.get("/api/inbox", params={"box": "action"})).json()["items"]
        first = next(i for i in pending_of(items, run["id"]) if i["tool"] == "crm.send_email")
        card = await item_mail(mail, first["id"])
        assert "approve all" in text_of(card)

        answer = reply_to(card, "Approve all, thanks!")
        await send(mail, answer)
        said = text_of(await answer_to(mail, answer))
        assert "Approved 2 of 3: crm.send_email, crm.send_email." in said
        assert "Left out crm.lookup: needs 2 approvals: approve it on its own card." in said

        async def decided() -> list[dict[str, str]] | None:
            async with st.client() as c:
                r = await c.get("/api/inbox", params={"box": "action", "all": "true"})
            mine = [i for i in r.json()["items"] if i["run_id"] == run["id"]]
            approved = [i for i in mine if i["status"] == "approved"]
            return mine if len(approved) == 2 else None

        mine = await eventually(decided, what="the two mails approved by Alice")
        by_tool = sorted((i["tool"], i["status"], i["decided_by"] or "") for i in mine)
        assert by_tool == [
            ("crm.lookup", "pending", ""),
            ("crm.send_email", "approved", ALICE),
            ("crm.send_email", "approved", ALICE),
        ]
