"""Cards to draw on every chat platform: the adversarial schemas the Slack modals are checked
with, and items whose every text is as long as a model or a tool could make it, in every
state a card can show. Each platform's render tests check all of them against its limits."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from pizzabot.agent.model import Box, Item, ItemKind, ItemStatus, Risk
from tests.scenarios.test_slack_modals import SCHEMAS

AT = datetime(2026, 11, 29, 9, 0, tzinfo=UTC)
BASE_URL = "http://pizza.example"
HUGE = "Ünïcödé 🍕 <b>&amp;</b> *_~`|" * 400  # markup of every platform, astral characters

WIDE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {f"field_{i:02d}_" + "x" * 80: {"type": "string"} for i in range(40)},
}


def action(schema: dict[str, Any], args: dict[str, Any], item_id: str = "0123456789abcdef") -> Item:
    return Item(
        id=item_id,
        run_id="run-" + item_id,
        skill="sales",
        box=Box.ACTION,
        kind=ItemKind.TOOL,
        status=ItemStatus.PENDING,
        title="sales wants to run crm.send_email",
        body="Mailing Ann.",
        created_at=AT,
        call_id="c1",
        tool="crm.send_email",
        args=args,
        schema=schema,
    )


def huge_item() -> Item:
    """Every text at its longest: title, body, risk notes, the rule, forty long arguments."""
    args = {name: HUGE for name in WIDE_SCHEMA["properties"]}
    return replace(
        action(WIDE_SCHEMA, args),
        title=HUGE,
        body=HUGE,
        tool=HUGE[:200] + "." + HUGE[:200],
        risk=Risk(
            impact=HUGE,
            reversible=False,
            scope=HUGE,
            may_have_happened=True,
            hints=(HUGE, HUGE),
            rule=HUGE,
            approvals_required=3,
            approved=(HUGE, HUGE),
        ),
        requested_by=HUGE,
    )


def cards() -> Iterator[tuple[str, Item]]:
    """(what, item) for every card a platform must draw within its limits."""
    for what, (schema, args) in SCHEMAS.items():
        yield what, action(schema, args)
    huge = huge_item()
    yield "every text at its longest", huge
    yield "approved only with a passkey", replace(huge, risk=replace(huge.risk, step_up="passkey"))
    decided = {"decided_by": HUGE, "decided_via": "telegram", "decided_at": AT}
    yield (
        "rejected with a long reason",
        replace(huge, status=ItemStatus.REJECTED, reason=HUGE, **decided),
    )
    yield "edited", replace(huge, status=ItemStatus.EDITED, final_args=huge.args, **decided)
    yield "a budget item", replace(huge, kind=ItemKind.BUDGET, tool=None, schema=None)
    yield "a question", replace(huge, kind=ItemKind.QUESTION, tool=None)
    yield (
        "an unread note",
        replace(huge, box=Box.UNREAD, kind=ItemKind.RUN, status=ItemStatus.UNREAD, args=None),
    )
    yield "no arguments", action({"type": "object", "properties": {}}, {})
