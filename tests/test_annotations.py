"""MCP tool annotations (readOnlyHint, destructiveHint, ...) as hints: shown on the card where
the skill gives no risk notes, and a reason to run a tool without asking only where the skill
opts in (`defaults: {read_only: auto}`), never over its own policy, rule or pattern."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pizzabot.agent.model import Item
from pizzabot.agent.policy import Principal
from pizzabot.channels.email.compose import MailIdentity, Thread, item_mail
from pizzabot.channels.slack import blocks
from tests.peers import mcp_tools
from tests.peers.inproc import InProcess
from tests.peers.stack import Stack
from tests.test_rules import REFUND_RULES, call_from_input, event, run_call, web_page
from tests.waiting import eventually

#: What the shop server's tools say of themselves, as the card words it.
NOTES_HINTS = ("read-only", "idempotent", "stays inside its own system")
CLOSE_HINTS = ("changes things", "destructive", "reaches outside systems")
READ_ONLY_AUTO = "a read-only tool (defaults.read_only)"


def skill(name: str, tools_log: Path, **over: Any) -> dict[str, Any]:
    return {
        "name": name,
        "mcp_servers": {"shop": mcp_tools.shop_server(tools_log)},
        "tools": {"crm.*": "auto"},
        **over,
    }


def called(st: Stack, tool: str) -> list[dict[str, Any]]:
    return [c["args"] for c in st.tool_calls() if c["tool"] == tool]


def hints_on(page: str) -> list[str]:
    return [h for h in (*NOTES_HINTS, *CLOSE_HINTS) if f'<span class="badge">{h}</span>' in page]


async def test_read_only_tools_run_without_asking_only_where_the_skill_opts_in(
    tmp_path: Path,
) -> None:
    log = tmp_path / "tools.jsonl"
    opted_in = skill("test", log, defaults={"read_only": "auto"})
    plain = skill("plain", log)
    async with Stack(tmp_path, script=call_from_input, skill=opted_in, extra_skills=[plain]) as st:
        # Opted in: the read-only tool runs at once, and the log says why.
        run = await run_call(st, "shop__read_notes", {"customer": "Ann"})
        assert run["status"] == "done" and "prefers email" in run["result"]
        assert event(run, "tool_started")["rule"] == READ_ONLY_AUTO
        assert f"auto: {READ_ONLY_AUTO}" in await web_page(st, f"/runs/{run['id']}")

        # A destructive tool is still asked about, its hints on the card.
        run = await run_call(st, "shop__close_account", {"customer": "Ann"})
        assert run["status"] == "waiting"
        item = await st.wait_item(run["id"])
        card = await web_page(st, f"/items/{item['id']}")
        assert hints_on(card) == list(CLOSE_HINTS)
        assert "the tool's server says (not checked)" in card
        assert called(st, "close_account") == []

        # Not opted in: the read-only tool is asked about like any unlisted tool.
        run = await run_call(st, "shop__read_notes", {"customer": "Bob"}, skill="plain")
        assert run["status"] == "waiting"
        item = await st.wait_item(run["id"])
        assert hints_on(await web_page(st, f"/items/{item['id']}")) == list(NOTES_HINTS)
        assert called(st, "read_notes") == [{"customer": "Ann"}]


async def test_annotations_never_loosen_an_explicit_policy_a_rule_or_a_star(
    tmp_path: Path,
) -> None:
    log = tmp_path / "tools.jsonl"
    opt_in = {"read_only": "auto"}
    star = skill("test", log, defaults=opt_in, tools={"*": "ask"})
    listed = skill(
        "listed",
        log,
        defaults=opt_in,
        tools={"shop.read_notes": {"policy": "ask", "impact": "low", "reversible": True}},
    )
    ruled = skill(
        "ruled",
        log,
        defaults=opt_in,
        tools={
            "shop.read_notes": {
                "policy": "ask",
                "rules": [
                    {
                        "when": {"customer": "Zed"},
                        "policy": "deny",
                        "reason": "Zed's notes are sealed",
                    }
                ],
            }
        },
    )
    async with Stack(
        tmp_path, script=call_from_input, skill=star, extra_skills=[listed, ruled]
    ) as st:
        run = await run_call(st, "shop__read_notes", {"customer": "Ann"})
        assert run["status"] == "waiting" and "rule" not in event(run, "tool_request")
        item = await st.wait_item(run["id"])
        assert hints_on(await web_page(st, f"/items/{item['id']}")) == list(NOTES_HINTS)

        run = await run_call(st, "shop__read_notes", {"customer": "Ann"}, skill="listed")
        assert run["status"] == "waiting"
        item = await st.wait_item(run["id"])
        card = await web_page(st, f"/items/{item['id']}")
        # The skill's own notes, and not the tool's hints.
        assert "low impact" in card and "can be undone" in card and hints_on(card) == []

        run = await run_call(st, "shop__read_notes", {"customer": "Zed"}, skill="ruled")
        assert run["status"] == "done" and "Zed's notes are sealed" in run["result"]
        assert called(st, "read_notes") == []


async def test_slack_and_email_cards_show_the_hints_and_the_rule_that_asked(
    tmp_path: Path,
) -> None:
    over = {
        "mcp_servers": {"shop": mcp_tools.shop_server(tmp_path / "tools.jsonl")},
        "tools": {"shop.refund": REFUND_RULES},
        "deliver": {"slack": "C123", "email": ["ann@example.com"]},
    }
    async with InProcess(tmp_path, call_from_input, skill=over, channels=("slack", "email")) as h:
        for tool, args in (
            ("shop__read_notes", {"customer": "Ann"}),
            ("shop__refund", {"amount": 300, "currency": "EUR", "note": "goodwill"}),
        ):
            run = await h.runs.start(
                "test", json.dumps({"tool": tool, "args": args}), by=Principal.owner("api")
            )
            await h.wait(run.id, {"waiting"})

        async def cards() -> list[Item] | None:
            delivered = [item for item, _ in h.recorded["slack"].delivered]
            return delivered if len(delivered) == 2 else None

        notes, refund = sorted(
            await eventually(cards, what="two cards on Slack"), key=lambda i: i.tool or ""
        )
        run_of = {i.id: await h.store.get_run(i.run_id) for i in (notes, refund)}

        slack_notes = json.dumps(blocks.message(notes, base_url="http://pb").blocks)
        assert "the tool says _read-only, idempotent, stays inside its own system_" in slack_notes
        slack_refund = json.dumps(blocks.message(refund, base_url="http://pb").blocks)
        assert "Asked by rule 7 of shop.refund: a refund with a note needs a look" in slack_refund
        assert "the tool says" not in slack_refund  # the refund tool says nothing of itself

        def mail_text(item: Item) -> str:
            mail = item_mail(
                item,
                run_of[item.id],
                identity=MailIdentity(address="bot@example.com"),
                to="ann@example.com",
                message_id="<m1@example.com>",
                thread=Thread("a run"),
                can_decide=True,
                token="tok",
                links=None,
                now=item.created_at,
            )
            part = mail.get_body(preferencelist=("plain",))
            assert part is not None
            return str(part.get_content())

        assert (
            "Risk: the tool says read-only, idempotent, stays inside its own system (not checked)"
            in mail_text(notes)
        )
        refund_mail = mail_text(refund)
        assert "Risk: no notes" in refund_mail
        assert "Asked by: rule 7 of shop.refund: a refund with a note needs a look" in refund_mail
