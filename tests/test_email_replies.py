"""Reading decisions out of real-world reply mails: the corpus in tests/fixtures/replies.

Each .eml is shaped like what a mail client sends (Gmail, Outlook, Apple Mail, Thunderbird,
iPhone, mutt, GMX, Mail.ru, Proton, Yahoo, Zoho; plain, HTML-only, quoted-printable, base64;
UTF-8, ISO-8859-1/-15, Windows-1252, KOI8-R, GB2312; in eight languages), and expected.json
says which decision it must yield, including replies that must yield none. The tests below
them name the shapes one by one: attributions, header blocks, separators and "sent from"
lines in other languages, sign-offs, and HTML bodies whose letters must arrive as typed.
"""

from __future__ import annotations

import email
import email.policy
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from pizzabot.agent.model import Box, Item, ItemKind, ItemStatus
from pizzabot.channels.email.edits import edit_arguments
from pizzabot.channels.email.replies import (
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


# --- the quoted mail, in the writer's language ---------------------------------------------

BOT = "Pizza Bot <bot@example.test>"
QUOTE = "> test wants to run crm.send_email\n> Reply approve, edit or reject.\n> approve\n"


def decision(text: str) -> Command | None:
    return parse_command(top_of_reply(text))


@pytest.mark.parametrize(
    "attribution",
    [
        "On Mon, Nov 30, 2026 at 10:02 AM Pizza Bot <bot@example.test> wrote:",
        "On Mon, Nov 30, 2026 at 10:02 AM Pizza Bot <\nbot@example.test> wrote:",
        "On Wed, Nov 30, Pizza Bot\n<bot@example.test>\nwrote:",
        "Le lun. 30 nov. 2026 à 10:02, Pizza Bot <bot@example.test> a écrit :",
        "Am Mo., 30. Nov. 2026 um 10:02 Uhr schrieb Pizza Bot <bot@example.test>:",
        "Pizza Bot <bot@example.test> schrieb am Mo., 30. Nov.\n2026 um 10:02:",
        "Am 30.11.2026\num 10:02 schrieb Pizza Bot\n<bot@example.test>:",
        "El lun, 30 nov 2026 a las 10:02, Pizza Bot (<bot@example.test>) escribió:",
        "Em seg., 30 de nov. de 2026 às 10:02, Pizza Bot <bot@example.test> escreveu:",
        "Il giorno lun 30 nov 2026 alle ore 10:02 Pizza Bot <bot@example.test> ha scritto:",
        "Op ma 30 nov. 2026 om 10:02 schreef Pizza Bot <bot@example.test>:",
        "Den mån 30 nov. 2026 kl 10:02 skrev Pizza Bot <bot@example.test>:",
        "W dniu 2026-11-30 10:02, Pizza Bot napisał:",
        '30.11.2026, 10:02, "Pizza Bot" <bot@example.test>:',
        "Понедельник, 30 ноября 2026, 10:02 +03:00 от Pizza Bot <bot@example.test>:",
        "Στις Δευ 30 Νοε 2026, 10:02 ο χρήστης Pizza Bot <bot@example.test> έγραψε:",
        "2026年11月30日(月) 10:02 Pizza Bot <bot@example.test>:",
        "在 2026年11月30日 10:02，Pizza Bot <bot@example.test> 写道：",
        "\u202bفي ٣٠/١١/٢٠٢٦ الساعة ١٠:٠٢ ص، كتب Pizza Bot <bot@example.test>:\u202c",
        "--- On Mon, 11/30/26, Pizza Bot <bot@example.test> wrote:",
        "---- On Mon, 30 Nov 2026 10:02:07 +0100 Pizza Bot <bot@example.test> wrote ----",
        "On Mon, 30 Nov 2026 10:02:07 +0100 Pizza Bot <bot@example.test> wrote",
        "bot@example.test wrote:",
        "Pizza Bot wrote:",
        "2026/11/30 Pizza Bot <bot@example.test>",
    ],
)
def test_an_attribution_in_any_language_ends_the_answer(attribution: str) -> None:
    assert decision(f"reject: too dear\n\n{attribution}\n{QUOTE}") == Command(
        "reject", reason="too dear"
    )
    # The word in the quote never decides, above or below it.
    assert decision(f"\n\n{attribution}\n{QUOTE}") is None
    assert decision(f"{attribution}\n{QUOTE}\nreject: too dear\n") == Command(
        "reject", reason="too dear"
    )


HEADER_BLOCKS = [
    "From: Pizza Bot <bot@example.test>\nSent: Monday, November 30, 2026 10:02 AM\n"
    "To: Alice\nSubject: [pizzabot] approve?",
    "*From:* Pizza Bot [mailto:bot@example.test]\n*Sent:* Monday, November 30, 2026 10:02\n"
    "*To:* Alice\n*Subject:* approve?",
    "From: Human Resources\n<a-long-automated-address@example.test>\n"
    "Sent: Monday, November 30, 2026 10:02 AM\nTo: Alice",
    "De : Pizza Bot <bot@example.test>\nEnvoyé : lundi 30 novembre 2026 10:02\nÀ : Claire",
    "De : Pizza Bot <bot@example.test>\nÀ : Claire\nEnvoyé le : lundi 30 novembre 2026 10h02",
    "Gesendet: Montag, 30. November 2026 um 10:02 Uhr\nVon: bot@example.test\nAn: Anna",
    "Von: Pizza Bot <bot@example.test>\nGesendet: Montag, 30. November 2026 10:02\nAn: Anna",
    "Van: Pizza Bot [mailto:bot@example.test]\nVerzonden: maandag 30 november 2026 10:02\n"
    "Aan: Anna\nOnderwerp: approve?",
    "Da: Pizza Bot <bot@example.test>\nInviato: lunedì 30 novembre 2026 10:02\nA: Marco",
    "Fra: Pizza Bot <bot@example.test>\nSendt: 30. november 2026 10:02\nTil: Søren",
    "Från: Pizza Bot <bot@example.test>\nSkickat: den 30 november 2026 10:02\nTill: Sven",
    "Od: Pizza Bot <bot@example.test>\nWysłano: poniedziałek, 30 listopada 2026 10:02\nDo: Jan",
    "От: Pizza Bot <bot@example.test>\nОтправлено: 30 ноября 2026 г. 10:02\nКому: Иван",
    "发件人: Pizza Bot <bot@example.test>\n发送时间: 2026年11月30日 10:02\n收件人: Wang",
    "差出人: Pizza Bot <bot@example.test>\n送信日時: 2026年11月30日 10:02\n宛先: Sato",
    "\u200fمن: Pizza Bot <bot@example.test>\n\u200f\u200fتم الإرسال: Monday, November 30, 2026\n"
    "إلى: Ali",
]


@pytest.mark.parametrize("block", HEADER_BLOCKS)
@pytest.mark.parametrize(
    "above", ["", "________________________________\n", "-----Original Message-----\n"]
)
def test_a_quoted_header_block_in_any_language_ends_the_answer(block: str, above: str) -> None:
    quoted = f"{above}{block}\n\ntest wants to run crm.send_email. Reply approve.\n"
    assert decision(f"reject: too dear\n\n{quoted}") == Command("reject", reason="too dear")
    assert decision(f"\n{quoted}\napprove\n") is None


@pytest.mark.parametrize(
    "separator",
    [
        "-----Original Message-----",
        "-----Mensaje original-----",
        "-------- Message d'origine --------",
        "-----Original-Nachricht-----",
        "-------- Ursprüngliche Nachricht --------",
        "-------- Oprindelig besked --------",
        "---------- Forwarded message ---------",
        "________________________________",
        "====",
    ],
)
def test_a_separator_ends_the_answer(separator: str) -> None:
    text = f"reject: too dear\n\n{separator}\nPizza Bot asks: approve?\n"
    assert decision(text) == Command("reject", reason="too dear")


@pytest.mark.parametrize(
    "signature",
    [
        "Sent from my iPhone",
        "Sent from [Proton Mail](https://proton.me/mail/home) for Android.",
        "Get Outlook for iOS<https://aka.ms/o0ukef>",
        "Gesendet von Outlook für Android<https://aka.ms/AAb9ysg>",
        "Von meinem iPhone gesendet",
        "Envoyé à partir de Outlook pour iOS<https://aka.ms/o0ukef>",
        "Envoyé de mon iPhone",
        "Enviado desde mi iPhone",
        "Inviato da iPhone",
        "Verzonden vanuit Outlook voor iOS",
        "Skickat från min iPhone",
        "Отправлено из мобильной Почты Mail.ru",
        "\u202bأُرسلت من الـ iPhone\u202c",
        "iPhoneから送信",
        "发自我的iPhone",
    ],
)
def test_a_mobile_signature_ends_the_answer(signature: str) -> None:
    text = f"reject: too dear\n\n{signature}\n\nHi there, the quoted mail says approve\n"
    assert decision(text) == Command("reject", reason="too dear")


@pytest.mark.parametrize(
    ("typed", "reason"),
    [
        ("reject: too dear\n\nThanks,\nAlice", "too dear"),
        ("reject: too dear\nThanks, Alice", "too dear"),
        ("reject: too dear\n\nMit freundlichen Grüßen\nMax Muster", "too dear"),
        ("reject: too dear\n\nBien à vous,\n\nClaire Dubois", "too dear"),
        ("reject: too dear\n\nMed venlig hilsen\nAnders Andersen\n+45 12 34 56 78", "too dear"),
        ("reject: too dear\n\n以上、よろしくお願いいたします", "too dear"),
        ("reject: too dear\n\n-Abhishek", "too dear"),
        ("reject: too dear\n\nEva\n\nMag. Eva Musterfrau\nA-1000 Wien, Grüngasse 1", "too dear"),
        # The reason's own lines stay, with or without a closing full stop.
        (
            "reject: too dear\n\nUse Bob's account instead\n\nThanks,\nAlice",
            "too dear\n\nUse Bob's account instead",
        ),
        ("reject: thanks for nothing, too expensive", "thanks for nothing, too expensive"),
        (
            "reject: too dear\nSent from the wrong account, use ann@example.com",
            "too dear\nSent from the wrong account, use ann@example.com",
        ),
    ],
)
def test_the_reason_is_what_was_typed_without_the_sign_off(typed: str, reason: str) -> None:
    assert decision(typed) == Command("reject", reason=reason)


@pytest.mark.parametrize(
    "last_line",
    [
        "reject: the 2024 price list is outdated",
        "reject: wrong recipient, it must go to ann@example.org",
    ],
)
def test_a_reason_naming_a_date_or_address_right_above_the_attribution_stays(
    last_line: str,
) -> None:
    text = f"{last_line}\nOn Mon, Nov 30, 2026 at 10:02 AM Pizza Bot <bot@example.test> wrote:\n{QUOTE}"
    command = decision(text)
    assert command is not None and command.reason == last_line.removeprefix("reject: ")


@pytest.mark.parametrize(
    "fields",
    [
        "subject: Meeting\nto: bob@example.com",
        "From: me@example.com\nTo: bob@example.com\nSubject: Hi",
        "Date: 2026-12-01\nSubject: Hi",
    ],
)
def test_edit_lines_that_look_like_mail_headers_stay_edit_lines(fields: str) -> None:
    command = decision(f"edit\n{fields}\n\n{BOT} wrote:\n{QUOTE}")
    assert command is not None and command.problem is None
    assert command.values == dict(line.split(": ", 1) for line in fields.split("\n"))


# --- HTML bodies -----------------------------------------------------------------------------


def html_mail(html: str) -> email.message.EmailMessage:
    msg = email.message.EmailMessage()
    msg["From"] = "a@example.test"
    msg["Subject"] = "Re: x"
    msg.set_content(html, subtype="html", charset="utf-8", cte="quoted-printable")
    parsed = email.message_from_bytes(msg.as_bytes(), policy=email.policy.default)
    assert isinstance(parsed, email.message.EmailMessage)
    return parsed


def test_html_letters_arrive_exactly_as_typed() -> None:
    html = (
        "<div>reject: Angebot f&uuml;r M&uuml;ller &amp; S&ouml;hne &ndash; "
        "&#8222;zu teuer&#8220; &euro;&nbsp;5 *a* _b_ [c] 1. `d`</div>"
    )
    assert read_reply(html_mail(html))[1] == Command(
        "reject", reason="Angebot für Müller & Söhne – „zu teuer“ € 5 *a* _b_ [c] 1. `d`"
    )


def test_html_lines_and_list_items_stay_edit_lines() -> None:
    html = (
        "<html><head><style>p {margin:0}</style><title>Re: x</title></head><body>"
        "<p>edit</p><p>- copies: 3</p><ul><li>priority: low</li></ul><div><br></div>"
        "<p>Thanks</p></body></html>"
    )
    text = body_text(html_mail(html))
    assert text == "edit\n- copies: 3\n- priority: low\n\nThanks"
    assert parse_command(text) == Command("edit", values={"copies": "3", "priority": "low"})


def test_html_quotes_and_rules_read_as_quotes() -> None:
    html = (
        "<div>approve</div><div><br></div><div class=gmail_quote>On Mon, Nov 30, 2026 at "
        "10:02 Pizza Bot &lt;bot@example.test&gt; wrote:<br><blockquote>reject<br>"
        "<blockquote>nested</blockquote></blockquote></div><hr><div>From: x</div>"
    )
    assert body_text(html_mail(html)).split("\n") == [
        "approve",
        "",
        "On Mon, Nov 30, 2026 at 10:02 Pizza Bot <bot@example.test> wrote:",
        "> reject",
        "> > nested",
        "________________________________",
        "From: x",
    ]
    only_quoted = "<div><br></div><blockquote type=cite>approve<br>ok</blockquote>"
    assert read_reply(html_mail(only_quoted))[1] is None


def test_html_with_a_head_left_open_still_shows_its_body() -> None:
    html = "<html><head><meta charset=utf-8><title>Re: x<body><div>approve</div></body>"
    assert read_reply(html_mail(html))[1] == Command("approve")
