"""Question items: the decision rules (accept / decline / cancel), the flat forms a question
may ask for, answers typed as `field: value` lines, how a server's question reaches the call
that asked it, and the web page's question card with JavaScript off (a plain form post).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import mcp_types
import pytest

from pizzabot.agent.argforms import coerce_form, form_fields
from pizzabot.agent.errors import AlreadyDecided, InvalidArguments
from pizzabot.agent.events import NewEvent, RunFinished
from pizzabot.agent.mcp_call import CallQuestions
from pizzabot.agent.mcp_connection import Connection
from pizzabot.agent.model import Approve, Box, Edit, Item, ItemKind, ItemStatus, Reject, RunStatus
from pizzabot.agent.policy import Principal
from pizzabot.agent.questions import (
    FREE_TEXT_SCHEMA,
    Answer,
    Question,
    answer_of,
    check_schema,
    link_refusal,
    question_url,
    validate_answer,
    values_from_lines,
)
from tests.peers.mcp_elicit import FORM, LINK, NESTED
from tests.peers.web import T0, Form, WebApp, csrf_of

ANSWER: dict[str, Any] = {
    "name": "Ann",
    "email": "ann@example.com",
    "seats": 2,
    "size": "small",
    "color": "b",
    "tags": ["vip"],
}


async def question(
    web: WebApp, *, schema: dict[str, Any] | None = FORM, args: dict[str, Any] | None = None
) -> Item:
    run_id = await web.run("ask")
    await web.store.set_status(run_id, RunStatus.RUNNING, lease=None, now=T0)
    item = Item(
        id=f"q-{run_id}",
        run_id=run_id,
        skill=web.skill.name,
        box=Box.ACTION,
        kind=ItemKind.QUESTION,
        status=ItemStatus.PENDING,
        title="ask.profile asks: Fill in the profile",
        body="Fill in the profile, please.",
        created_at=T0,
        call_id="call1",
        tool="ask.profile",
        args=args if args is not None else {},
        schema=schema,
        secret="s",
    )
    return await web.store.create_item(item, targets=[], lease=None, now=T0)


async def decide(web: WebApp, item: Item, decision: Any) -> Item:
    return await web.inbox.decide(item.id, decision, by=Principal.owner("api"))


async def test_an_edit_accepts_with_its_values_and_an_approval_with_the_proposal(
    tmp_path: Path,
) -> None:
    async with WebApp(tmp_path) as web:
        item = await question(web)
        assert answer_of(item) is None
        done = await decide(web, item, Edit(ANSWER))
        assert done.status is ItemStatus.EDITED
        # The form's default for the field the answer left out comes with it.
        assert answer_of(done) == Answer("accept", {**ANSWER, "vip": False})
        with pytest.raises(AlreadyDecided):  # the first answer wins
            await decide(web, done, Reject())

        proposed = await question(web, args=ANSWER)
        approved = await decide(web, proposed, Approve())
        assert approved.status is ItemStatus.APPROVED
        assert answer_of(approved) == Answer("accept", {**ANSWER, "vip": False})


async def test_an_answer_outside_the_form_is_refused_by_field(tmp_path: Path) -> None:
    async with WebApp(tmp_path) as web:
        item = await question(web)
        with pytest.raises(InvalidArguments) as bad:
            await decide(web, item, Edit({**ANSWER, "seats": 0, "email": "nope", "extra": 1}))
        assert {"seats", "email", "extra"} <= set(bad.value.errors)
        with pytest.raises(InvalidArguments) as missing:
            await decide(web, item, Approve())  # the proposal ({}) lacks required fields
        assert "name" in missing.value.errors
        with pytest.raises(InvalidArguments):
            await decide(web, item, Approve(grant="run"))  # no grant for a question
        assert (await web.store.get_item(item.id)).status is ItemStatus.PENDING


async def test_reject_declines_and_expiry_or_the_runs_end_cancel(tmp_path: Path) -> None:
    async with WebApp(tmp_path) as web:
        declined = await decide(web, await question(web), Reject("no"))
        assert answer_of(declined) == Answer("decline")

        expired = await web.inbox.expire((await question(web)).id, reason="no one answered")
        assert expired.status is ItemStatus.EXPIRED and answer_of(expired) == Answer("cancel")

        open_item = await question(web)
        await web.store.finish_run(
            open_item.run_id,
            RunStatus.CANCELLED,
            lease=None,
            now=T0,
            events=[NewEvent(RunFinished(status=RunStatus.CANCELLED))],
            unread=Item(
                id="note1",
                run_id=open_item.run_id,
                skill="test",
                box=Box.UNREAD,
                kind=ItemKind.RUN,
                status=ItemStatus.UNREAD,
                title="cancelled",
                body="",
                created_at=T0,
            ),
            targets=[],
        )
        closed = await web.store.get_item(open_item.id)
        assert closed.status is ItemStatus.CANCELLED and answer_of(closed) == Answer("cancel")


async def test_a_link_is_accepted_or_declined_never_edited(tmp_path: Path) -> None:
    async with WebApp(tmp_path) as web:
        item = await question(web, schema=None, args={"url": LINK})
        assert question_url(item) == LINK
        with pytest.raises(InvalidArguments):
            await decide(web, item, Edit({"url": "https://elsewhere.test/"}))
        done = await decide(web, item, Approve())
        assert answer_of(done) == Answer("accept")  # a link's accept carries no content


def test_the_flat_forms_a_question_may_ask_for() -> None:
    assert check_schema(FORM) is None
    assert check_schema(FREE_TEXT_SCHEMA) is None
    refused = {
        "nested": NESTED,
        "ref": {"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}}},
        "pattern": {"type": "object", "properties": {"a": {"type": "string", "pattern": "(a+)+$"}}},
        "format": {"type": "object", "properties": {"a": {"type": "string", "format": "ipv4"}}},
        "free list": {"type": "object", "properties": {"a": {"type": "array", "items": {}}}},
        "number enum": {"type": "object", "properties": {"a": {"type": "string", "enum": [1]}}},
        "required ghost": {"type": "object", "properties": {}, "required": ["x"]},
        "not object": {"type": "array"},
    }
    for why, schema in refused.items():
        assert check_schema(schema) is not None, why
    assert check_schema([]) is not None


def test_links_only_https_with_a_host() -> None:
    assert link_refusal(LINK) is None
    for bad in ("javascript:alert(1)", "file:///etc/passwd", "https://", "https://a b.test/"):
        assert link_refusal(bad) is not None, bad
    assert "https://" in (link_refusal("http://auth.example.test/") or "")
    assert link_refusal("https://x.test/" + "a" * 3000) is not None


def test_formats_are_checked_even_where_jsonschema_would_not() -> None:
    schema = FORM
    good = {**ANSWER, "homepage": "https://a.test/", "meeting": "2026-12-01T09:30:00+01:00"}
    assert validate_answer(schema, good) == {}
    bad = {**ANSWER, "homepage": "a.test", "meeting": "2026-12-01 09:30", "birthday": "1/4/90"}
    assert set(validate_answer(schema, bad)) == {"homepage", "meeting", "birthday"}


def test_field_value_lines_become_typed_values() -> None:
    text = (
        "Your name: Ann Lee\nemail: ann@example.com\nSeats: 4\nbudget: 9.5\nVIP: yes\n"
        "size: Large\ncolor: Green\ntags: new, late\npets: Cat, dog\nsomething else: ignored\n"
    )
    values, errors = values_from_lines(FORM, text)
    assert errors == {}
    assert values == {
        "name": "Ann Lee",
        "email": "ann@example.com",
        "seats": 4,
        "budget": 9.5,
        "vip": True,
        "size": "large",
        "color": "g",
        "tags": ["new", "late"],
        "pets": ["cat", "dog"],
    }
    _, errors = values_from_lines(FORM, "name: Ann\nemail: ann@example.com\nseats: many")
    assert set(errors) >= {"seats", "size", "color"}
    # A free-text question takes the whole reply when no line names its field.
    assert values_from_lines(FREE_TEXT_SCHEMA, "Yes, go ahead.\nThanks") == (
        {"answer": "Yes, go ahead.\nThanks"},
        {},
    )


def test_titled_and_several_choices_on_forms() -> None:
    fields = {f.name: f for f in form_fields(FORM, {"tags": ["vip"], "color": "r"})}
    assert fields["color"].kind == "select"
    assert fields["color"].labelled_options() == [("r", "Red"), ("g", "Green"), ("b", "Blue")]
    assert fields["tags"].kind == "multiselect" and fields["tags"].value == '["vip"]'
    assert fields["pets"].option_labels == ("Cat", "Dog")
    values, errors = coerce_form(
        FORM,
        {**{k: str(v) for k, v in ANSWER.items()}, "tags": '["new", "vip"]', "pets": "Dog"},
    )
    assert errors == {}, errors
    assert values["tags"] == ["new", "vip"] and values["pets"] == ["dog"]
    _, errors = coerce_form(FORM, {**{k: str(v) for k, v in ANSWER.items()}, "tags": "new, old"})
    assert "tags" in errors


async def test_a_servers_question_goes_to_the_one_call_in_flight() -> None:
    conn = Connection("ask", "http://127.0.0.1:1/mcp")
    asked: list[Question] = []

    async def ask(q: Question) -> Answer:
        asked.append(q)
        return Answer("accept", {"name": "Ann"}) if q.url is None else Answer("accept")

    form = mcp_types.ElicitRequestFormParams(message="Who?", requested_schema=FREE_TEXT_SCHEMA)
    link = mcp_types.ElicitRequestURLParams(message="Open", url=LINK, elicitation_id="e1")
    ctx: Any = None
    # No call in flight, or one that cannot ask: cancel.
    assert (await conn._elicit(ctx, form)).action == "cancel"
    quiet = conn.enter(CallQuestions(None))
    assert (await conn._elicit(ctx, form)).action == "cancel"
    conn.leave(quiet)

    token = conn.enter(CallQuestions(ask))
    got = await conn._elicit(ctx, form)
    assert (got.action, got.content) == ("accept", {"name": "Ann"})
    got = await conn._elicit(ctx, link)
    assert (got.action, got.content) == ("accept", None)
    assert [q.url for q in asked] == [None, LINK] and asked[0].schema == FREE_TEXT_SCHEMA

    # Two calls in flight: which one asked cannot be known, so no one is asked.
    other = conn.enter(CallQuestions(ask))
    assert (await conn._elicit(ctx, form)).action == "cancel"
    assert len(asked) == 2
    conn.leave(other)
    conn.leave(token)
    await asyncio.sleep(0)


async def test_the_question_card_works_without_javascript(tmp_path: Path) -> None:
    async with WebApp(tmp_path) as web:
        item = await question(web)
        async with web.client(logged_in=True) as c:
            page = await c.get(f"/items/{item.id}")
            assert page.status_code == 200
            html = page.text
            assert "Fill in the profile, please." in html and ">Send<" in html
            assert ">Decline<" in html and "Approve" not in html
            form = Form(html)
            assert form.controls["arg.color"]["options"][:2] == [
                {"value": "", "text": "(choose one)"},
                {"value": "r", "text": "Red"},
            ]
            assert form.controls["arg.email"]["type"] == "email"
            assert form.controls["arg.homepage"]["type"] == "url"
            assert form.controls["arg.birthday"]["type"] == "date"
            assert 'name="arg.tags" value="late"' in html  # one checkbox per choice

            # A wrong answer comes back with the error by its field; nothing is decided.
            post: Any = {"csrf": csrf_of(html), "decision": "edit", "arg.name": "Ann"}
            post |= {"arg.email": "ann@example.com", "arg.seats": "x", "arg.size": "small"}
            post |= {"arg.color": "b", "arg.tags": ["vip", "new"]}
            bad = await c.post(f"/items/{item.id}", data=post)
            assert bad.status_code == 422 and "whole number" in bad.text
            assert (await web.store.get_item(item.id)).status is ItemStatus.PENDING

            post["arg.seats"] = "2"
            ok = await c.post(f"/items/{item.id}", data=post)
            assert ok.status_code == 303 and "flash=answered" in ok.headers["location"]
            done = await web.store.get_item(item.id)
            assert done.final_args == {
                "name": "Ann",
                "email": "ann@example.com",
                "seats": 2,
                "vip": False,
                "size": "small",
                "color": "b",
                "tags": ["vip", "new"],
            }
            after = (await c.get(f"/items/{item.id}")).text
            assert "Answered" in after and "ann@example.com" in after

            link = await question(web, schema=None, args={"url": LINK})
            html = (await c.get(f"/items/{link.id}")).text
            assert "<b>example.test</b>" in html and "(host auth.example.test)" in html
            assert LINK.replace("&", "&amp;") in html
            assert 'rel="noopener noreferrer nofollow"' in html and "<details" in html
            declined = await c.post(
                f"/items/{link.id}", data={"csrf": csrf_of(html), "decision": "reject"}
            )
            assert "flash=declined" in declined.headers["location"]
            assert (await web.store.get_item(link.id)).status is ItemStatus.REJECTED


def test_a_links_domain_shows_an_international_name_in_ascii() -> None:
    from pizzabot.agent.questions import link_domain

    # A Cyrillic "а" in a look-alike of example.com: shown as the xn-- name it really is.
    assert link_domain("https://ex\u0430mple.com/pay") == "xn--exmple-4nf.com"
    assert link_domain("https://example.com/pay") == "example.com"
