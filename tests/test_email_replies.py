"""Reading decisions out of real-world reply mails: the corpus in tests/fixtures/replies.

Each .eml is shaped like what a mail client sends (Gmail, Outlook, Apple Mail, Thunderbird,
iPhone, mutt; plain, HTML-only, quoted-printable, base64; UTF-8, ISO-8859-1, Windows-1252),
and expected.json says which decision it must yield, including replies that must yield none.
"""

from __future__ import annotations

import email
import email.policy
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from agent.model import Box, Item, ItemKind, ItemStatus
from channels.email.inbound import edit_arguments
from channels.email.replies import (
    Command,
    UnreadableMail,
    body_text,
    parse_command,
    read_reply,
    top_of_reply,
)

FIXTURES = Path(__file__).parent / "fixtures" / "replies"
EXPECTED: dict[str, dict[str, Any]] = {
    k: v for k, v in json.loads((FIXTURES / "expected.json").read_text()).items() if k != "_about"
}
SEND_EMAIL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "to": {"description": "Recipient's email address.", "title": "To", "type": "string"},
        "subject": {"description": "Subject line.", "title": "Subject", "type": "string"},
        "body": {"description": "Plain-text body.", "title": "Body", "type": "string"},
        "priority": {
            "default": "normal",
            "enum": ["low", "normal", "high"],
            "title": "Priority",
            "type": "string",
        },
        "copies": {
            "default": 1,
            "maximum": 10,
            "minimum": 1,
            "title": "Copies",
            "type": "integer",
        },
        "cc": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None, "title": "Cc"},
        "receipt": {"default": False, "title": "Receipt", "type": "boolean"},
    },
    "required": ["to", "subject", "body"],
}
PROPOSED = {
    "to": "ann@example.com",
    "subject": "Quote",
    "body": "Here is the quote.",
    "priority": "normal",
    "copies": 1,
}


def action(args: dict[str, Any] | None = None) -> Item:
    return Item(
        id="i1",
        run_id="r1",
        skill="test",
        box=Box.ACTION,
        kind=ItemKind.TOOL,
        status=ItemStatus.PENDING,
        title="test wants to run crm.send_email",
        body="I will mail Ann.",
        created_at=datetime(2026, 11, 30, tzinfo=UTC),
        tool="crm.send_email",
        args=dict(PROPOSED if args is None else args),
        schema=SEND_EMAIL_SCHEMA,
        secret="s3cret",
    )


def load(name: str) -> email.message.EmailMessage:
    msg = email.message_from_bytes((FIXTURES / name).read_bytes(), policy=email.policy.default)
    assert isinstance(msg, email.message.EmailMessage)
    return msg


def test_every_fixture_has_an_expectation_and_back() -> None:
    assert sorted(p.name for p in FIXTURES.glob("*.eml")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_reply_fixture_yields_its_decision(name: str) -> None:
    want = EXPECTED[name]
    msg = load(name)
    if want.get("unreadable"):
        with pytest.raises(UnreadableMail):
            read_reply(msg)
        return
    _top, command = read_reply(msg)
    if want["decision"] is None:
        assert command is None
        return
    assert command is not None and command.kind == want["decision"]
    if command.kind == "reject":
        assert command.reason == want["reason"]
    if command.kind == "edit":
        assert command.problem is None
        assert command.values == want["values"]
        args, errors = edit_arguments(action(), command)
        assert errors == {}
        assert args == {**PROPOSED, **want["args"]}


def test_non_ascii_survives_each_declared_charset() -> None:
    assert "möchte erst nächste Woche – bitte" in body_text(load("qp_utf8_german_reject.eml"))
    assert "café" in body_text(load("iso8859_1_reject.eml"))
    assert "“too expensive” –" in body_text(load("windows1252_reject.eml"))
    assert "Devis révisé" in body_text(load("base64_utf8_french_edit_json.eml"))


def test_the_quoted_instructions_never_count() -> None:
    # Our own mail says "approve" in its instructions; quoting it must not approve.
    text = body_text(load("nothing_quote_only.eml"))
    assert "approve" in text
    assert top_of_reply(text) == ""


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("yes", "approve"),
        ("OK!", "approve"),
        ("lgtm 👍", "approve"),
        ("Approve, thanks", "approve"),
        ("Hi bot,\n\napprove\n\nAlice", "approve"),
        ("yes please do it tomorrow instead", None),
        ("okay so here is the thing", None),
        ("rejection letters are hard", None),
        ("", None),
    ],
)
def test_first_line_words(text: str, kind: str | None) -> None:
    command = parse_command(text)
    assert (command.kind if command else None) == kind


def test_reject_reason_runs_over_lines_but_not_the_sign_off() -> None:
    command = parse_command("reject: wrong customer.\nUse Bob's account instead.\n\nThanks,\nAlice")
    assert command == Command("reject", reason="wrong customer.\nUse Bob's account instead.")


def test_reject_without_reason_is_still_a_rejection() -> None:
    assert parse_command("reject") == Command("reject", reason="")


def test_edit_with_broken_json_says_where() -> None:
    command = parse_command('edit {"copies": 2,, }')
    assert command is not None and command.kind == "edit"
    assert command.problem is not None and "line 1" in command.problem


def test_edit_with_nothing_to_change_is_a_problem() -> None:
    command = parse_command("edit\n\nThanks")
    assert command is not None and command.problem is not None


def test_edit_errors_name_each_field() -> None:
    command = parse_command("edit\ncopies: eleven\npriority: urgent\ncolour: red")
    assert command is not None
    _args, errors = edit_arguments(action(), command)
    assert set(errors) == {"copies", "priority", "colour"}
    assert "whole number" in errors["copies"]
    assert "low" in errors["priority"] and "high" in errors["priority"]
    assert "no such field" in errors["colour"]


def test_edit_out_of_range_is_refused_by_the_schema() -> None:
    command = parse_command("edit\ncopies: 11")
    assert command is not None
    _args, errors = edit_arguments(action(), command)
    assert list(errors) == ["copies"] and "10" in errors["copies"]


def test_edit_json_with_wrong_type_is_refused() -> None:
    command = parse_command('edit {"copies": "many"}')
    assert command is not None
    _args, errors = edit_arguments(action(), command)
    assert "copies" in errors


def test_edit_field_names_ignore_case() -> None:
    command = parse_command("edit\nPriority: high")
    assert command is not None
    args, errors = edit_arguments(action(), command)
    assert errors == {} and args["priority"] == "high"


def test_a_text_part_is_needed() -> None:
    raw = (
        b"From: a@example.test\r\nTo: b@example.test\r\nSubject: x\r\nMIME-Version: 1.0\r\n"
        b"Content-Type: image/png\r\nContent-Transfer-Encoding: base64\r\n\r\niVBORw0KGgo=\r\n"
    )
    msg = email.message_from_bytes(raw, policy=email.policy.default)
    assert isinstance(msg, email.message.EmailMessage)
    with pytest.raises(UnreadableMail):
        body_text(msg)


def test_unknown_charset_is_unreadable() -> None:
    raw = (
        b"From: a@example.test\r\nSubject: x\r\nMIME-Version: 1.0\r\n"
        b"Content-Type: text/plain; charset=x-martian\r\n\r\napprove\r\n"
    )
    msg = email.message_from_bytes(raw, policy=email.policy.default)
    assert isinstance(msg, email.message.EmailMessage)
    with pytest.raises(UnreadableMail, match="x-martian"):
        body_text(msg)
