"""Previews on approval cards, end to end: a real `pizzabot serve` process whose scripted
model asks for calls that need a person. A write to a granted folder shows the diff it would
make; a payment whose skill names a dry run shows what the dry run said, on Slack (a local
recorder of its Web API), in the mail (a real SMTP + IMAP server) and on the web page, as
text and marked as a preview; the real tool runs only once approved."""

from __future__ import annotations

import asyncio
import html
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pizzabot.agent.model import PREVIEW_LABEL
from tests.e2e.test_cli_errors import Cli
from tests.e2e.test_email_e2e import ALICE, env, item_mail, text_of
from tests.e2e.test_grants_web import browser
from tests.peers import dry_runs
from tests.peers.mailserver import MailServer
from tests.peers.required import require
from tests.peers.slack_api import Call, SlackApi, block_actions, http_mode_env, post_interaction
from tests.peers.stack import Reply, Stack, ToolCall, turns

SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
BOSS = "U0BOSS"
PAY = {"to": "NL91 ABNA 0417 1643 00", "amount": 250}


def pay_skill(log: Path, *, preview: str, **more: Any) -> dict[str, Any]:
    return {
        "mcp_servers": {"pay": dry_runs.pay_server(log)},
        "tools": {"pay.transfer": {"policy": "ask", "preview": preview, **more}},
    }


def pays(**args: Any) -> Any:
    return turns(
        Reply(text="Paying the invoice.", tool_calls=[ToolCall("pay__transfer", args)]),
        Reply(text="Paid."),
    )


def blocks_of(call: Call) -> str:
    return json.dumps(call.args.get("blocks"), ensure_ascii=False)


async def test_a_write_to_a_granted_folder_shows_the_diff_it_would_make(tmp_path: Path) -> None:
    drafts = tmp_path / "drafts"
    drafts.mkdir()
    (drafts / "reply.md").write_text("Dear Ann,\nthanks for the quote.\nBest, Bo\n")
    skill = {
        "folders": [{"path": str(drafts), "write": True}],
        "tools": {"files.write_file": "ask"},
    }
    content = "Dear Ann,\nthanks for the quote: we accept.\nBest, Bo\n"
    script = turns(
        Reply(tool_calls=[ToolCall("files__write_file", {"path": "drafts/reply.md", "content": content})]),
        Reply(text="Written."),
    )  # fmt: skip
    async with Stack(tmp_path / "stack", script=script, skill=skill) as st:
        run = await st.start_run("test", "answer Ann")
        item = await st.wait_item(run["id"])
        preview = item["risk"]["preview"]
        assert preview["by"] == "files.preview_write" and not preview["failed"]
        assert "--- a/drafts/reply.md" in preview["text"]
        assert "-thanks for the quote.\n+thanks for the quote: we accept.\n" in preview["text"]
        # Computed by reading: nothing was written yet.
        assert (drafts / "reply.md").read_text().endswith("quote.\nBest, Bo\n")

        async with browser(st) as c:
            page = (await c.get(f"/items/{item['id']}")).text
        assert PREVIEW_LABEL in page and "+thanks for the quote: we accept." in page
        shown = await asyncio.to_thread(Cli(st.server), "item", item["id"], columns=200)
        assert shown.code == 0, shown.err
        assert f"{PREVIEW_LABEL} (by files.preview_write)" in shown.out
        assert "+thanks for the quote: we accept." in shown.out

        assert (await st.decide(item["id"], "approve")).status_code == 200
        await st.wait_run(run["id"], {"done"})
    assert (drafts / "reply.md").read_text() == content


@pytest.fixture(scope="module")
def mail() -> Iterator[MailServer]:
    require("mail")
    with MailServer() as server:
        yield server


async def test_a_dry_run_preview_shows_on_slack_mail_and_the_web_page(
    mail: MailServer, tmp_path: Path
) -> None:
    log = tmp_path / "pay.jsonl"
    skill = {
        **pay_skill(log, preview="pay.transfer_dry_run"),
        "deliver": {"slack": "C123", "email": [ALICE]},
        "approvers": {"slack": [BOSS], "email": [ALICE]},
    }
    async with SlackApi() as slack:
        both = {**env(mail), **http_mode_env(slack.url, SECRET)}
        async with Stack(tmp_path / "stack", script=pays(**PAY), skill=skill, env=both) as st:
            run = await st.start_run("test", "pay the invoice")
            item = await st.wait_item(run["id"])
            said = "Would pay 250 EUR to NL91 ABNA 0417 1643 00; balance after: 750 EUR."
            assert item["risk"]["preview"]["text"].startswith(said)
            # The dry run ran with the call's arguments; the real tool did not.
            assert dry_runs.calls(log) == [("transfer_dry_run", PAY)]

            [post] = await slack.wait_for(
                "chat.postMessage", lambda c: "approval needed" in blocks_of(c)
            )
            shown = blocks_of(post)
            assert PREVIEW_LABEL in shown and said in shown
            # Shown as text: no mention, link or markup of the server's comes alive.
            assert "<@U0BOSS>" not in shown and "<https://evil.example" not in shown
            assert "&lt;@U0BOSS&gt;" in shown and "&lt;script&gt;" in shown
            [preview_block] = [
                b for b in post.args["blocks"] if PREVIEW_LABEL in json.dumps(b, ensure_ascii=False)
            ]
            assert preview_block["text"]["text"].count("```") == 2  # its own code block only

            card = await item_mail(mail, item["id"])
            plain = text_of(card)
            assert f"{PREVIEW_LABEL} (by pay.transfer_dry_run):" in plain
            assert f"  | {said}" in plain
            rich = card.get_body(("html",))
            assert rich is not None
            rich_text = str(rich.get_content())
            assert html.escape(PREVIEW_LABEL) in rich_text or PREVIEW_LABEL in rich_text
            assert "&lt;script&gt;" in rich_text and "<script>" not in rich_text

            async with browser(st) as c:
                page = (await c.get(f"/items/{item['id']}")).text
            assert PREVIEW_LABEL in page and said in page
            assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "<script>alert" not in page

            click = block_actions(
                action_id="pizza_approve",
                value=next(
                    e["value"]
                    for b in post.args["blocks"]
                    if b["type"] == "actions"
                    for e in b["elements"]
                    if e["action_id"] == "pizza_approve"
                ),
                user=BOSS,
                channel=str(post.answer["channel"]),
                message_ts=str(post.answer["ts"]),
            )
            r = await post_interaction(f"{st.server.url}/slack/events", click, secret=SECRET)
            assert r.status_code == 200
            await st.wait_run(run["id"], {"done"})
    assert dry_runs.calls(log) == [("transfer_dry_run", PAY), ("transfer", PAY)]


@pytest.mark.parametrize(
    ("preview", "more", "says"),
    [
        (
            "pay.transfer_broken_dry_run",
            {},
            "no preview: pay.transfer_broken_dry_run failed (Error executing tool "
            "transfer_broken_dry_run: the ledger is closed for the night)",
        ),
        (
            "pay.transfer_slow_dry_run",
            {"preview_timeout": "1s"},
            "no preview: pay.transfer_slow_dry_run did not answer within 1s",
        ),
    ],
)
async def test_a_preview_that_fails_says_so_and_the_card_still_waits(
    tmp_path: Path, preview: str, more: dict[str, Any], says: str
) -> None:
    log = tmp_path / "pay.jsonl"
    skill = pay_skill(log, preview=preview, **more)
    async with Stack(tmp_path / "stack", script=pays(**PAY), skill=skill) as st:
        run = await st.start_run("test", "pay the invoice")
        item = await st.wait_item(run["id"])
        assert item["status"] == "pending"
        assert item["risk"]["preview"] == {"text": says, "by": preview, "failed": True}
        assert [tool for tool, _ in dry_runs.calls(log)] == [preview.split(".")[1]]
        # A failed preview approves nothing and blocks nothing: the person still decides.
        assert (await st.decide(item["id"], "reject", reason="no preview")).status_code == 200
        await st.wait_run(run["id"], {"done"})
    assert "transfer" not in [tool for tool, _ in dry_runs.calls(log)]


async def test_an_edit_on_the_way_to_two_approvals_previews_the_edited_call(
    tmp_path: Path,
) -> None:
    log = tmp_path / "pay.jsonl"
    skill = pay_skill(log, preview="pay.transfer_dry_run", approvals={"required": 2})
    async with Stack(tmp_path / "stack", script=pays(**PAY), skill=skill) as st:
        run = await st.start_run("test", "pay the invoice")
        item = await st.wait_item(run["id"])
        async with st.client() as c:
            before = (await c.get(f"/api/items/{item['id']}")).json()
            assert "Would pay 250 EUR" in before["risk"]["preview"]["text"]
            edited = {**PAY, "amount": 40}
            r = await c.post(
                f"/api/items/{item['id']}/decision",
                json={"decision": "edit", "args": edited, "seen": before["digest"]},
            )
            assert r.status_code == 200, r.text
            after = (await c.get(f"/api/items/{item['id']}")).json()
            assert after["status"] == "pending" and after["args"] == edited
            assert after["risk"]["preview"]["text"].startswith("Would pay 40 EUR")
            assert after["digest"] != before["digest"]
            # An approval made on the old card, with the old preview, does not count.
            r = await c.post(
                f"/api/items/{item['id']}/decision",
                json={"decision": "approve", "seen": before["digest"]},
            )
            assert r.status_code == 409, r.text
            assert r.json()["detail"]["digest"] == after["digest"]
    assert dry_runs.calls(log) == [("transfer_dry_run", PAY), ("transfer_dry_run", edited)]
