"""Rules on argument values, end to end: a real server, the scripted model asking the "shop"
MCP server to refund, and the skill's rules deciding each call as the card, the timeline and
the model then say."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx

from pizzabot.agent.testing.scripts import last_tool_result, message_text
from tests.peers import mcp_tools
from tests.peers.server import TOKEN
from tests.peers.stack import Reply, Stack, ToolCall

#: Each rule is decided by the operator it is named for (first match wins).
REFUND_RULES: dict[str, Any] = {
    "policy": "ask",
    "rules": [
        # 1: lte, in
        {"when": {"amount": {"lte": 100}, "currency": {"in": ["EUR", "USD"]}}, "policy": "auto"},
        # 2: gt
        {
            "when": {"amount": {"gt": 5000}},
            "policy": "deny",
            "reason": "refunds over 5,000 go through finance",
        },
        # 3: not_in, on a nested argument (present: a refund naming no customer is left to
        # the rules after it; without it, a deny rule's not_in counts it as matching)
        {
            "when": {"customer.country": {"present": True, "not_in": ["NL", "BE", "DE"]}},
            "policy": "deny",
            "reason": "we refund only in NL, BE and DE",
        },
        # 4: matches (the whole string), lt
        {
            "when": {"reference": {"matches": "INV-[0-9]{4}"}, "amount": {"lt": 1000}},
            "policy": "auto",
        },
        # 5: a bare value is eq
        {"when": {"currency": "GBP"}, "policy": "deny", "reason": "no refunds in pounds"},
        # 6: gte, ne
        {
            "when": {"amount": {"gte": 1000}, "currency": {"ne": "EUR"}},
            "policy": "deny",
            "reason": "large refunds only in euros",
        },
        # 7: present, eq
        {
            "when": {"note": {"present": True}, "currency": {"eq": "EUR"}},
            "policy": "ask",
            "reason": "a refund with a note needs a look",
        },
    ],
}


def shop_skill(tools_log: Path, **over: Any) -> dict[str, Any]:
    """The test skill with the "shop" server beside "crm", and the refund rules."""
    tools: dict[str, Any] = {"shop.refund": REFUND_RULES, "crm.*": "auto"}
    return {"mcp_servers": {"shop": mcp_tools.shop_server(tools_log)}, "tools": tools, **over}


def call_from_input(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Reply:
    """The run's input is the call to make, as JSON `{"tool": ..., "args": ...}`; once its
    result is in, the model repeats it (so a test reads what the model was told)."""
    result = last_tool_result(messages)
    if result is not None:
        return Reply(text=f"The tool said: {result}")
    asked = json.loads(next(message_text(m) for m in messages if m["role"] == "user"))
    return Reply(tool_calls=[ToolCall(asked["tool"], asked["args"])])


async def run_call(
    st: Stack, tool: str, args: dict[str, Any], skill: str = "test"
) -> dict[str, Any]:
    """Start a run that makes one call; return the run once it waits or ends."""
    run = await st.start_run(skill, json.dumps({"tool": tool, "args": args}))
    return await st.wait_run(run["id"], {"waiting", "done", "failed"})


def refunds(st: Stack) -> list[dict[str, Any]]:
    return [c["args"] for c in st.tool_calls() if c["tool"] == "refund"]


def event(run: dict[str, Any], kind: str) -> dict[str, Any]:
    data: dict[str, Any] = next(e["data"] for e in run["events"] if e["kind"] == kind)
    return data


async def web_page(st: Stack, path: str) -> str:
    """A page of the web inbox as a signed-in person sees it."""
    async with httpx.AsyncClient(base_url=st.server.url) as c:
        login = await c.get("/login", params={"token": TOKEN})
        assert login.status_code == 303, login.text
        page = await c.get(path)
        assert page.status_code == 200, page.text
        return " ".join(page.text.split())


async def test_each_operator_decides_a_refund_as_its_rule_says(tmp_path: Path) -> None:
    async with Stack(
        tmp_path, script=call_from_input, skill=shop_skill(tmp_path / "tools.jsonl")
    ) as st:
        # auto: run at once, and the log says which rule let them.
        for args, rule in (
            ({"amount": 40, "currency": "EUR"}, 1),  # lte, in
            ({"amount": 100.0, "currency": "USD"}, 1),  # 100.0 is the number 100
            ({"amount": 700, "currency": "CHF", "reference": "INV-0042"}, 4),  # matches, lt
        ):
            run = await run_call(st, "shop__refund", args)
            assert run["status"] == "done", (args, run)
            assert event(run, "tool_started")["rule"] == f"rule {rule} of shop.refund"
            assert refunds(st)[-1]["amount"] == args["amount"]
        assert len(refunds(st)) == 3

        # deny: nothing runs, and the model reads the rule's reason.
        for args, rule, reason in (
            ({"amount": 6000, "currency": "EUR"}, 2, "refunds over 5,000 go through finance"),
            (
                {"amount": 300, "currency": "EUR", "customer": {"name": "Zoe", "country": "FR"}},
                3,
                "we refund only in NL, BE and DE",
            ),
            ({"amount": 300, "currency": "GBP"}, 5, "no refunds in pounds"),
            ({"amount": 2000, "currency": "USD"}, 6, "large refunds only in euros"),
        ):
            run = await run_call(st, "shop__refund", args)
            assert run["status"] == "done", (args, run)
            assert f"not allowed by rule {rule} of shop.refund: {reason}" in run["result"]
            assert event(run, "tool_result")["denied_by"] == f"rule {rule} of shop.refund"
        assert len(refunds(st)) == 3

        # ask: by rule 7, or by the tool's policy when no rule holds.
        asked: tuple[tuple[dict[str, Any], int | None], ...] = (
            ({"amount": 300, "currency": "EUR", "note": "goodwill"}, 7),  # present, eq
            ({"amount": 300, "currency": "EUR", "note": None}, None),  # null is not present
            ({"amount": 700, "currency": "CHF", "reference": "INV-0042-B"}, None),  # whole string
            (
                {"amount": 300, "currency": "EUR", "customer": {"name": "Ann", "country": "NL"}},
                None,
            ),
        )
        for args, asked_by in asked:
            run = await run_call(st, "shop__refund", args)
            assert run["status"] == "waiting", (args, run)
            request = event(run, "tool_request")
            assert request.get("rule") == (f"rule {asked_by} of shop.refund" if asked_by else None)
        assert len(refunds(st)) == 3


async def test_an_amount_that_is_not_a_json_number_is_refused_before_any_rule(
    tmp_path: Path,
) -> None:
    """The server would read "6000" as 6000 and refund it: such a call does not fit the
    tool's schema (a number), so it is neither run, nor asked about, nor judged by a rule that
    reads numbers; the model is told what is wrong, and a call that fits is judged."""
    async with Stack(
        tmp_path, script=call_from_input, skill=shop_skill(tmp_path / "tools.jsonl")
    ) as st:
        for amount in ("50", "100.0", "100.0e0", True, "6000"):
            run = await run_call(st, "shop__refund", {"amount": amount, "currency": "EUR"})
            assert run["status"] == "done", (amount, run)
            result = event(run, "tool_result")
            assert result["denied_by"] == "the input schema of shop.refund"
            assert "amount: must be a number" in result["text"], result
            assert "amount: must be a number" in run["result"]
            assert not any(e["kind"] == "tool_request" for e in run["events"])
        async with st.client() as c:
            pending = (await c.get("/api/inbox", params={"box": "action"})).json()["items"]
        assert pending == []
        assert refunds(st) == []

        # The same amount as a number: rule 2 denies it.
        run = await run_call(st, "shop__refund", {"amount": 6000, "currency": "EUR"})
        assert event(run, "tool_result")["denied_by"] == "rule 2 of shop.refund"
        assert refunds(st) == []


async def test_an_edit_is_checked_against_the_rules_and_the_card_and_timeline_say_which_rule(
    tmp_path: Path,
) -> None:
    async with Stack(
        tmp_path, script=call_from_input, skill=shop_skill(tmp_path / "tools.jsonl")
    ) as st:
        proposed = {"amount": 300, "currency": "EUR", "note": "goodwill"}
        run = await run_call(st, "shop__refund", proposed)
        item = await st.wait_item(run["id"])

        card = await web_page(st, f"/items/{item['id']}")
        assert "Asked by <b>rule 7 of shop.refund: a refund with a note needs a look</b>" in card

        # An edit that a rule denies is refused with the rule's reason, and nothing is decided.
        denied = await st.decide(item["id"], "edit", args={**proposed, "amount": 9000})
        assert denied.status_code == 422
        assert denied.json()["detail"]["errors"] == {
            "": "rule 2 of shop.refund denies these arguments: refunds over 5,000 go through finance"
        }
        async with st.client() as c:
            assert (await c.get(f"/api/items/{item['id']}")).json()["status"] == "pending"

        # An edit the rules allow runs with the edited arguments.
        edited = {**proposed, "amount": 80}
        assert (await st.decide(item["id"], "edit", args=edited)).status_code == 200
        done = await st.wait_run(run["id"], {"done"})
        assert [r["amount"] for r in refunds(st)] == [80]
        assert "refunded 80 EUR" in done["result"]

        timeline = await web_page(st, f"/runs/{run['id']}")
        assert "ask: rule 7 of shop.refund" in timeline

        auto = await run_call(st, "shop__refund", {"amount": 20, "currency": "EUR"})
        assert "auto: rule 1 of shop.refund" in await web_page(st, f"/runs/{auto['id']}")
        deny = await run_call(st, "shop__refund", {"amount": 20, "currency": "GBP"})
        assert "deny: rule 5 of shop.refund" in await web_page(st, f"/runs/{deny['id']}")


async def test_a_rule_on_an_argument_the_tool_does_not_have_fails_the_run_saying_where(
    tmp_path: Path,
) -> None:
    """The tools' schemas are known once their servers list them: a misspelt argument in a
    rule is refused then, with the skill file and the rule's line."""
    misspelt = {
        "policy": "ask",
        "rules": [{"when": {"customer.county": "NL"}, "policy": "auto"}],
    }
    over = shop_skill(tmp_path / "tools.jsonl")
    over["tools"] = {**over["tools"], "shop.refund": misspelt}
    async with Stack(tmp_path, script=call_from_input, skill=over) as st:
        run = await run_call(st, "shop__refund", {"amount": 5, "currency": "EUR"})
        assert run["status"] == "failed"
        path = st.skills_dir / "test.yaml"
        line = next(
            n
            for n, text in enumerate(path.read_text().splitlines(), 1)
            if "customer.county" in text
        )
        assert run["error"].startswith(f"{path}:{line}: ")
        assert "'customer.county' is not an argument of shop.refund" in run["error"]
        assert refunds(st) == []
