"""Teams end to end: a real server process; the Bot Framework played by a local peer (its
OpenID configuration and JWKS, its token endpoint, its connector); activities POSTed to
`/teams/messages` with tokens signed by the peer's key, as the Bot Framework signs them.

One server serves the module; every story uses its own run and finds its own cards by the
item's id. Each story ends with Teams accepting every card the bot sent (Adaptive Card 1.5),
and every card the bot answers with is checked as it comes.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import jwt
import pytest
import pytest_asyncio

from tests.peers.adaptive_cards import card_problems
from tests.peers.recorder import Call
from tests.peers.stack import Stack
from tests.peers.stories import EMAIL, send_then_summarise
from tests.peers.teams_api import (
    APP_ID,
    APP_SECRET,
    APP_TOKEN,
    Signer,
    TeamsPeer,
    action,
    card_of,
    find_action,
    message,
    post_activity,
    task,
)
from tests.waiting import eventually

pytestmark = pytest.mark.asyncio(loop_scope="module")

CHANNEL = "19:pizza-team@thread.tacv2"
PAIR = "19:pair-team@thread.tacv2"
ANN = "0a0a0a0a-1111-4222-8333-444444444444"
BOB = "0b0b0b0b-1111-4222-8333-444444444444"
STRANGER = "0f0f0f0f-1111-4222-8333-444444444444"


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def teams() -> AsyncIterator[TeamsPeer]:
    async with TeamsPeer() as peer:
        yield peer


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def stack(teams: TeamsPeer, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Stack]:
    root: Path = tmp_path_factory.mktemp("teams")
    env = {
        "PIZZABOT_TEAMS_APP_ID": APP_ID,
        "PIZZABOT_TEAMS_APP_PASSWORD": APP_SECRET,
        "PIZZABOT_TEAMS_OPENID_URL": teams.openid_url,
        "PIZZABOT_TEAMS_TOKEN_URL": teams.token_url,
        "PIZZABOT_TEAMS_SERVICE_URL": teams.service_url,
        "PIZZABOT_PUBLIC_URL": "http://pizza.example",
    }
    skill = {"deliver": {"teams": CHANNEL}, "approvers": {"teams": [ANN]}}
    pair = {
        "name": "pair",
        "people": {"ann": {"teams": ANN}, "bob": {"teams": BOB}},
        "approvers": ["ann", "bob"],
        "deliver": {"teams": PAIR},
        "tools": {"crm.send_email": {"policy": "ask", "approvals": {"required": 2}}},
    }
    guarded = {
        "name": "guarded",
        "deliver": {"teams": CHANNEL},
        "approvers": {"teams": [ANN]},
        "tools": {"crm.send_email": {"policy": "ask", "step_up": "passkey"}},
    }
    async with Stack(
        root, script=send_then_summarise, skill=skill, extra_skills=[pair, guarded], env=env
    ) as st:
        yield st


@pytest.fixture(autouse=True)
def teams_accepts_every_card(teams: TeamsPeer) -> Iterator[None]:
    yield
    teams.check()


def endpoint(st: Stack) -> str:
    return f"{st.server.url}/teams/messages"


def mentions(item_id: str) -> Any:
    return lambda c: item_id in json.dumps(c.args)


def text_of(card: dict[str, Any]) -> str:
    return json.dumps(card, ensure_ascii=False)


async def carded(
    st: Stack, teams: TeamsPeer, text: str, skill: str = "test"
) -> tuple[dict[str, Any], Call]:
    run = await st.start_run(skill, text)
    item = await st.wait_item(run["id"])
    calls = await teams.wait_for("send", mentions(item["id"]))
    return item, calls[0]


async def send(st: Stack, teams: TeamsPeer, body: dict[str, Any]) -> Any:
    """Send a signed activity; the answer (checked against Adaptive Card 1.5 when a card)."""
    r = await post_activity(endpoint(st), body, token=teams.signer.token(teams.service_url))
    assert r.status_code == 200, r.text
    if not r.content:
        return None
    answer = r.json()
    if answer.get("type") == "application/vnd.microsoft.card.adaptive":
        assert card_problems(answer["value"]) == [], answer
    dialog = (answer.get("task") or {}).get("value")
    if isinstance(dialog, dict):
        assert card_problems(dialog["card"]["content"]) == [], dialog
    return answer


def execute(
    teams: TeamsPeer, card: dict[str, Any], title: str, user: str, **inputs: Any
) -> dict[str, Any]:
    """A click on the Action.Execute titled `title` of `card` (its inputs merged into its data,
    as Teams sends them)."""
    act = find_action(card, title)
    return action(
        service_url=teams.service_url,
        user=user,
        conversation=CHANNEL,
        verb=act["verb"],
        data={**act["data"], **inputs},
    )


async def refreshed(st: Stack, teams: TeamsPeer, card: dict[str, Any], user: str) -> dict[str, Any]:
    """The card as Teams shows it to `user`: the answer to its refresh."""
    refresh = card["refresh"]["action"]
    body = action(
        service_url=teams.service_url,
        user=user,
        conversation=CHANNEL,
        verb="refresh",
        data=refresh["data"],
    )
    answer = await send(st, teams, body)
    card_now: dict[str, Any] = answer["value"]
    return card_now


def titles(card: dict[str, Any]) -> list[str]:
    return [a["title"] for a in card.get("actions") or []]


async def updated(teams: TeamsPeer, sent: Call, containing: str) -> Call:
    activity = sent.answer["id"]
    calls = await teams.wait_for(
        "update", lambda c: c.args["_activity"] == activity and containing in text_of(c.args)
    )
    return calls[-1]


async def item_now(st: Stack, item_id: str) -> dict[str, Any]:
    async with st.client() as c:
        r = await c.get(f"/api/items/{item_id}")
        assert r.status_code == 200, r.text
        data: dict[str, Any] = r.json()
        return data


async def becomes(st: Stack, item_id: str, status: str) -> dict[str, Any]:
    async def check() -> dict[str, Any] | None:
        item = await item_now(st, item_id)
        return item if item["status"] == status else None

    return await eventually(check, what=f"item {item_id} to be {status}")


async def test_approve_shows_buttons_only_to_an_approver_and_updates_the_card(
    stack: Stack, teams: TeamsPeer
) -> None:
    st = stack
    item, sent = await carded(st, teams, "send Ann the quote")
    assert sent.auth == f"Bearer {APP_TOKEN}" and sent.args["_conversation"] == CHANNEL
    card = card_of(sent)
    assert "test: approval needed" in text_of(card) and "ann@example.com" in text_of(card)
    assert titles(card) == ["Open on the web page"]  # what everyone sees: no buttons
    assert titles(await refreshed(st, teams, card, STRANGER)) == ["Open on the web page"]
    mine = await refreshed(st, teams, card, ANN)
    assert titles(mine) == ["Approve", "Edit", "Reject", "Open on the web page"]
    answer = await send(st, teams, execute(teams, mine, "Approve", ANN))
    assert "Approved by " + ANN + " via teams" in text_of(answer["value"])
    assert titles(answer["value"]) == ["Open on the web page"]
    decided = await updated(teams, sent, "Approved by " + ANN + " via teams")
    assert "refresh" not in card_of(decided)
    await st.wait_run(item["run_id"], {"done"})
    [note] = await teams.wait_for("reply", lambda c: "Finished." in text_of(c.args))
    assert (
        note.args["_activity"] == sent.answer["id"] and note.args["replyToId"] == sent.answer["id"]
    )


async def test_edit_in_a_dialog_with_a_schema_error_then_a_valid_edit(
    stack: Stack, teams: TeamsPeer
) -> None:
    st = stack
    item, sent = await carded(st, teams, "send Ann the quote, twice")
    mine = await refreshed(st, teams, card_of(sent), ANN)
    edit = find_action(mine, "Edit")
    assert edit["type"] == "Action.Submit" and edit["data"]["msteams"] == {"type": "task/fetch"}
    fetch = task(
        service_url=teams.service_url,
        user=ANN,
        conversation=CHANNEL,
        name="task/fetch",
        data=edit["data"],
    )
    dialog = (await send(st, teams, fetch))["task"]
    assert dialog["type"] == "continue"
    form = dialog["value"]["card"]["content"]
    inputs = {e["label"]: e for e in form["body"] if str(e["type"]).startswith("Input.")}
    assert inputs["Copies"]["type"] == "Input.Number" and inputs["Copies"]["value"] == 1
    submit = find_action(form, "Run with these")
    values = {e["id"]: e.get("value") for e in inputs.values() if "value" in e}
    wrong = {
        **submit["data"],
        **{k: str(v) for k, v in values.items()},
        inputs["Copies"]["id"]: "many",
    }
    again = (
        await send(
            st,
            teams,
            task(
                service_url=teams.service_url,
                user=ANN,
                conversation=CHANNEL,
                name="task/submit",
                data=wrong,
            ),
        )
    )["task"]
    assert again["type"] == "continue"
    shown = text_of(again["value"]["card"]["content"])
    assert "Not applied" in shown and "must be" in shown
    assert (await item_now(st, item["id"]))["status"] == "pending"
    right = {**wrong, inputs["Copies"]["id"]: "2"}
    done = (
        await send(
            st,
            teams,
            task(
                service_url=teams.service_url,
                user=ANN,
                conversation=CHANNEL,
                name="task/submit",
                data=right,
            ),
        )
    )["task"]
    assert done == {"type": "message", "value": "Edited: it runs with your arguments."}
    decided = await becomes(st, item["id"], "edited")
    # The whole form comes back, as from Slack's modal: the tool's defaults included.
    assert decided["final_args"] == {**EMAIL, "copies": 2, "cc": None, "receipt": False}
    await updated(teams, sent, "Edited by " + ANN + " via teams")
    await st.wait_run(item["run_id"], {"done"})


async def test_reject_with_a_reason(stack: Stack, teams: TeamsPeer) -> None:
    st = stack
    item, sent = await carded(st, teams, "send Ann the quote, or not")
    mine = await refreshed(st, teams, card_of(sent), ANN)
    answer = await send(st, teams, execute(teams, mine, "Reject", ANN, reason="wrong customer"))
    assert "wrong customer" in text_of(answer["value"])
    done = await becomes(st, item["id"], "rejected")
    assert done["reason"] == "wrong customer"
    await updated(teams, sent, "wrong customer")
    run = await st.wait_run(item["run_id"], {"done"})
    told = [e["data"] for e in run["events"] if e["kind"] == "tool_result"]
    assert any("wrong customer" in str(t) for t in told)


async def test_a_non_approvers_click_is_refused_and_audited(stack: Stack, teams: TeamsPeer) -> None:
    st = stack
    item, sent = await carded(st, teams, "send Ann the quote, says a stranger")
    mine = await refreshed(st, teams, card_of(sent), ANN)
    # A stranger who sends the approver's click (Teams would show them no button) is refused.
    answer = await send(st, teams, execute(teams, mine, "Approve", STRANGER))
    assert "approvers.teams" in text_of(answer["value"])
    assert titles(answer["value"]) == ["Open on the web page"]
    edit = find_action(mine, "Edit")
    fetch = task(
        service_url=teams.service_url,
        user=STRANGER,
        conversation=CHANNEL,
        name="task/fetch",
        data=edit["data"],
    )
    refused = (await send(st, teams, fetch))["task"]
    assert refused["type"] == "message" and "approvers.teams" in refused["value"]
    assert (await item_now(st, item["id"]))["status"] == "pending"
    async with st.client() as c:
        entries = (await c.get("/api/audit")).json()["items"]
    found = [e for e in entries if e["action"] == "decision_refused" and e["item_id"] == item["id"]]
    assert [(e["actor"], e["channel"]) for e in found] == [(STRANGER, "teams")] * 2
    await st.decide(item["id"], "reject", reason="cleaning up")


async def test_a_card_that_needs_a_passkey_is_approved_on_the_page_not_by_a_click(
    stack: Stack, teams: TeamsPeer
) -> None:
    st = stack
    item, sent = await carded(st, teams, "send Ann the quote, with a passkey", "guarded")
    mine = await refreshed(st, teams, card_of(sent), ANN)
    page = f"http://pizza.example/items/{item['id']}"
    assert titles(mine) == ["Approve with passkey", "Edit", "Reject", "Open on the web page"]
    assert find_action(mine, "Approve with passkey") == {
        "type": "Action.OpenUrl",
        "title": "Approve with passkey",
        "url": page,
    }
    # The approve click sent anyway (it has no button to come from): refused, and told why.
    seen = find_action(mine, "Edit")["data"]["seen"]
    forged = action(
        service_url=teams.service_url,
        user=ANN,
        conversation=CHANNEL,
        verb="approve",
        data={"pz": "approve", "item": item["id"], "seen": seen},
    )
    answer = (await send(st, teams, forged))["value"]
    assert "passkey" in text_of(answer) and page in text_of(answer)
    assert "Approve with passkey" in titles(answer)
    assert (await item_now(st, item["id"]))["status"] == "pending"
    # Reject never needs a passkey.
    rejected = await send(st, teams, execute(teams, mine, "Reject", ANN, reason="not today"))
    assert "Rejected by " + ANN + " via teams" in text_of(rejected["value"])
    assert (await becomes(st, item["id"], "rejected"))["reason"] == "not today"


async def test_an_activity_without_a_valid_token_is_refused_before_it_is_read(
    stack: Stack, teams: TeamsPeer
) -> None:
    st = stack
    item, sent = await carded(st, teams, "send Ann the quote, forged")
    mine = await refreshed(st, teams, card_of(sent), ANN)
    click = execute(teams, mine, "Approve", ANN)
    url = teams.service_url
    now = int(time.time())
    forger = Signer(kid="forged-key")
    impostor = Signer()  # the same kid as the published key, another key
    bad = {
        "no token": None,
        "not a JWT": "not-a-jwt",
        "an unpublished key": forger.token(url),
        "the published kid, another key": impostor.token(url),
        "another bot": teams.signer.token(url, aud="another-app"),
        "another issuer": teams.signer.token(url, iss="https://sts.windows.net/evil/"),
        "expired": teams.signer.token(url, exp=now - 3600, nbf=now - 7200),
        "unsigned": jwt.encode(
            {
                "iss": "https://api.botframework.com",
                "aud": APP_ID,
                "exp": now + 60,
                "serviceurl": url,
            },
            key=None,
            algorithm="none",
        ),
    }
    for what, token in bad.items():
        r = await post_activity(endpoint(st), click, token=token)
        assert r.status_code == 401, what
    # Not even read: no JSON at all gets the same answer without a token, 400 with one.
    assert (await post_activity(endpoint(st), b"{no", token=None)).status_code == 401
    good = teams.signer.token(url)
    assert (await post_activity(endpoint(st), b"{no", token=good)).status_code == 400
    # A valid token for another service URL does not carry an activity naming this one.
    other = teams.signer.token("https://elsewhere.example/")
    assert (await post_activity(endpoint(st), click, token=other)).status_code == 401
    assert (await item_now(st, item["id"]))["status"] == "pending"
    await st.decide(item["id"], "reject", reason="cleaning up")


async def test_a_decision_on_another_channel_updates_the_card(
    stack: Stack, teams: TeamsPeer
) -> None:
    st = stack
    item, sent = await carded(st, teams, "send Ann the quote, from the API")
    mine = await refreshed(st, teams, card_of(sent), ANN)
    assert (await st.decide(item["id"], "approve")).status_code == 200
    update = await updated(teams, sent, "Approved by owner via api")
    assert titles(card_of(update)) == ["Open on the web page"] and "refresh" not in card_of(update)
    # A late click on the buttons Ann still had is told who decided first.
    answer = await send(st, teams, execute(teams, mine, "Approve", ANN))
    assert "Already approved by owner via api" in text_of(answer["value"])


async def test_a_click_on_a_card_from_before_an_edit_is_refused_as_changed(
    stack: Stack, teams: TeamsPeer
) -> None:
    st = stack
    item, sent = await carded(st, teams, "mail Ann, or rather Bea", skill="pair")
    mine = await refreshed(st, teams, card_of(sent), ANN)
    bea = {**EMAIL, "to": "bea@example.com"}
    assert (await st.decide(item["id"], "edit", args=bea)).status_code == 200
    redrawn = card_of(await updated(teams, sent, "bea@example.com"))
    assert "1 of 2 approved: owner via the API" in text_of(redrawn)
    old = execute(teams, mine, "Approve", ANN)
    old["conversation"]["id"] = PAIR
    answer = await send(st, teams, old)
    assert "card changed" in text_of(answer["value"])
    assert "bea@example.com" in text_of(answer["value"])  # the card as it is now
    assert (await item_now(st, item["id"]))["risk"]["approved"] == ["owner via the API"]
    now = execute(teams, answer["value"], "Approve", ANN)
    await send(st, teams, now)
    done = await becomes(st, item["id"], "edited")
    assert done["final_args"] == bea
    assert done["risk"]["approved"] == ["owner via the API", "ann via Teams"]


async def test_start_in_a_personal_chat_and_follow_up_in_the_runs_thread(
    stack: Stack, teams: TeamsPeer
) -> None:
    st = stack
    personal = "a:1personal-chat-with-ann"
    hello = message(
        service_url=teams.service_url,
        user=ANN,
        conversation=personal,
        text="test please mail Ann",
        conversation_type="personal",
    )
    await send(st, teams, hello)
    [said] = await teams.wait_for("reply", lambda c: "Started run" in c.args.get("text", ""))
    assert said.args["_conversation"] == personal and said.args["replyToId"] == hello["id"]
    async with st.client() as c:
        runs = (await c.get("/api/runs")).json()["items"]
    run = next(r for r in runs if r["input"] == "please mail Ann")
    assert run["trigger"] == "teams"
    item = await st.wait_item(run["id"])
    [sent] = await teams.wait_for("send", mentions(item["id"]))
    mine = await refreshed(st, teams, card_of(sent), ANN)
    await send(st, teams, execute(teams, mine, "Approve", ANN))
    await st.wait_run(run["id"], {"done"})
    thread = f"{CHANNEL};messageid={sent.answer['id']}"
    follow = message(
        service_url=teams.service_url,
        user=ANN,
        conversation=thread,
        text="<at>Pizza Bot</at> also copy Bob",
    )
    await send(st, teams, follow)

    async def followed() -> bool:
        got = await st.get_run(run["id"])
        return any(
            e["kind"] == "user_message" and "also copy Bob" in json.dumps(e["data"])
            for e in got["events"]
        )

    await eventually(followed, what="the follow-up in the run")
    # A stranger can neither start a run nor steer this one.
    await send(
        st,
        teams,
        message(
            service_url=teams.service_url,
            user=STRANGER,
            conversation="a:stranger",
            text="test hi",
            conversation_type="personal",
        ),
    )
    await teams.wait_for("reply", lambda c: "can start runs from Teams" in c.args.get("text", ""))
    steer = message(service_url=teams.service_url, user=STRANGER, conversation=thread, text="to me")
    await send(st, teams, steer)
    await teams.wait_for("reply", lambda c: "steer its runs" in c.args.get("text", ""))


async def test_a_throttled_connector_only_delays_the_card(stack: Stack, teams: TeamsPeer) -> None:
    teams.fail_next(1, status=429, retry_after=1, methods={"send"})
    item, sent = await carded(stack, teams, "send Ann the quote, when Teams lets us")
    limited = [c for c in teams.calls if c.method == "send" and c.status == 429]
    assert len(limited) == 1 and limited[0].at < sent.at
    assert sent.at - limited[0].at >= 0.9  # the connector's Retry-After, honoured
    await stack.decide(item["id"], "reject", reason="cleaning up")
