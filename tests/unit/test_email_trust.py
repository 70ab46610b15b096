"""The trust checks, the mails the bot composes, and signed links: pure functions, no I/O."""

from __future__ import annotations

import email
import email.policy
from datetime import UTC, datetime, timedelta
from email.message import EmailMessage

import pytest

from pizzabot.agent.model import Box, Item, ItemKind, ItemStatus, Risk, Run, RunStatus
from pizzabot.agent.policy import same_identity
from pizzabot.channels.email.compose import (
    MailIdentity,
    Thread,
    answer_mail,
    item_mail,
    notice_mail,
    subject_for,
)
from pizzabot.channels.email.headers import clean
from pizzabot.channels.email.keys import MailKey
from pizzabot.channels.email.links import BadLink, sign_link, verify_link
from pizzabot.channels.email.trust import (
    MailTrust,
    address_of,
    auth_failure,
    authenticated,
    check_reply,
    is_automatic,
    normalize_address,
    parse_auth_results,
    plus_tokens,
    sender_of,
    thread_refs,
)

BOT = MailIdentity(address="bot@example.test")
NOW = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)
KEY = MailKey(b"k" * 32)
SECRET = KEY.reply_token("i1", "alice@example.test")  # Alice's token for item i1
ITEM_MID = BOT.item_message_id("d1", SECRET)
TRUST = MailTrust(authserv_id="mx.example.test")
PASSED = "mx.example.test; dkim=pass header.d=example.test; dmarc=pass header.from=example.test"


def item(**over: object) -> Item:
    fields: dict[str, object] = {
        "id": "i1",
        "run_id": "r1",
        "skill": "test",
        "box": Box.ACTION,
        "kind": ItemKind.TOOL,
        "status": ItemStatus.PENDING,
        "title": "test wants to run crm.send_email",
        "body": "I will mail Ann <ann@example.com> & Bob.",
        "created_at": NOW,
        "tool": "crm.send_email",
        "args": {"to": "ann@example.com", "copies": 1, "body": "line 1\nline 2"},
        "schema": {
            "type": "object",
            "properties": {
                "to": {"type": "string"},
                "copies": {"type": "integer", "minimum": 1, "maximum": 10},
                "body": {"type": "string"},
            },
            "required": ["to"],
        },
        "risk": Risk(impact="high", reversible=False, scope="external"),
        "secret": "item-secret-never-mailed",
    }
    fields.update(over)
    return Item(**fields)  # type: ignore[arg-type]


def run() -> Run:
    return Run(
        id="r1",
        skill="test",
        status=RunStatus.WAITING,
        input="send Ann the quote\nand make it quick",
        trigger="api",
        created_at=NOW,
        updated_at=NOW,
    )


def reply(
    *,
    sender: str = "Alice <Alice@Example.test>",
    to: str | None = None,
    in_reply_to: str | None = ITEM_MID,
    headers: dict[str, str] | None = None,
) -> EmailMessage:
    msg = EmailMessage(policy=email.policy.default)
    msg["From"] = sender
    msg["To"] = to or f"bot+{SECRET}@example.test"
    msg["Subject"] = "Re: [pizzabot] test: send Ann the quote"
    if in_reply_to:
        msg["In-Reply-To"] = in_reply_to
        msg["References"] = in_reply_to
    for k, v in (headers or {}).items():
        msg[k] = v
    msg.set_content("approve\n")
    return msg


# --- trust ---------------------------------------------------------------------------------


def test_address_of_ignores_display_name_and_case() -> None:
    assert address_of('"Bob, the boss" <Bob@Example.TEST>') == "bob@example.test"
    assert address_of("alice@example.test, bob@example.test") is None
    assert address_of("undisclosed-recipients:;") is None


@pytest.mark.parametrize(
    ("raw", "sender"),
    [
        (b"From: Alice <Alice@Example.test>", "alice@example.test"),
        (b"From: alice@example.test <mallory@evil.test>", None),
        (b"From: alice@example.test\r\nFrom: mallory@evil.test", None),
        (b"From: alice@example.test, mallory@evil.test", None),
        (b"From: friends: alice@example.test;", None),
        ("From: \u212aate@example.test".encode(), None),
        (b"From: =?utf-8?q?=E2=84=AAate?=@example.test", None),
        (b"Subject: no sender", None),
    ],
)
def test_only_one_plain_unambiguous_from_is_a_sender(raw: bytes, sender: str | None) -> None:
    msg = email.message_from_bytes(raw + b"\r\n\r\nx", policy=email.policy.default)
    assert isinstance(msg, EmailMessage)
    assert sender_of(msg)[0] == sender


def test_addresses_compare_ascii_only() -> None:
    assert normalize_address(" Kate@Example.TEST ") == "kate@example.test"
    assert normalize_address("\u212aate@example.test") is None  # lower() would make it kate@
    assert not same_identity("email", "\u212aate@example.test", "kate@example.test")
    assert same_identity("email", "Kate@Example.test", "kate@example.test")


def test_header_text_is_one_clean_line() -> None:
    assert clean("=?utf-8?q?Hi=0D=0AReply-To:_a@evil?=") == "Hi Reply-To: a@evil"
    assert clean("=?utf-8?q?=3D=3Futf-8=3Fq=3FHi=3D0D=3D0AX=3F=3D?=") == "Hi X"
    assert clean("a\u2028b\x85c\x00d =?x") == "a b c d = ?x"
    assert len(clean("word " * 100)) <= 200


def test_reply_tokens_are_per_item_and_recipient_and_survive_lower_casing() -> None:
    alice = KEY.reply_token("i1", "Alice@Example.test")
    assert alice == SECRET and alice == alice.lower() and len(alice) >= 26
    assert KEY.reply_token("i1", "bob@example.test") != alice
    assert KEY.reply_token("i2", "alice@example.test") != alice
    assert MailKey(b"x" * 32).reply_token("i1", "alice@example.test") != alice


def test_plus_tokens_come_from_the_bots_addresses_only() -> None:
    msg = reply(to=f"bot+{SECRET}@example.test, other+nope@example.test")
    msg["Delivered-To"] = "bot+second@example.test"
    msg["Cc"] = "bot+third@elsewhere.test"
    assert plus_tokens(msg, bot_address="bot@example.test") == {SECRET.casefold(), "second"}


def test_thread_refs_nearest_first() -> None:
    raw = b"From: a@x\r\nIn-Reply-To: <c@x>\r\nReferences: <a@x> <b@x>\r\n <c@x>\r\n\r\nhi\r\n"
    msg = email.message_from_bytes(raw, policy=email.policy.default)
    assert isinstance(msg, EmailMessage)
    assert thread_refs(msg) == ["c@x", "b@x", "a@x"]


def test_a_proper_reply_counts() -> None:
    verdict = check_reply(
        reply(headers={"Authentication-Results": PASSED}),
        sender="alice@example.test",
        token=SECRET,
        ref=ITEM_MID.strip("<>"),
        bot_address="bot@example.test",
        trust=TRUST,
    )
    assert verdict.ok, verdict.problems


def test_token_only_in_the_message_id_is_enough() -> None:
    # A server without plus-addressing: the reply went to bot@, the token is in References.
    verdict = check_reply(
        reply(to="bot@example.test", headers={"Authentication-Results": PASSED}),
        sender="alice@example.test",
        token=SECRET,
        ref=ITEM_MID.strip("<>"),
        bot_address="bot@example.test",
        trust=TRUST,
    )
    assert verdict.ok


def test_a_proper_reply_without_a_verdict_counts_only_under_the_mailbox_rule() -> None:
    def problems(trust: MailTrust) -> tuple[str, ...]:
        return check_reply(
            reply(),
            sender="alice@example.test",
            token=SECRET,
            ref=ITEM_MID.strip("<>"),
            bot_address="bot@example.test",
            trust=trust,
        ).problems

    assert problems(MailTrust(rule="mailbox")) == ()
    [why] = problems(TRUST)
    assert "no Authentication-Results from mx.example.test" in why


def test_missing_token_and_forgery_each_count_against() -> None:
    msg = reply(
        to="bot@example.test",
        headers={
            "Authentication-Results": "mx.example.test; dmarc=fail (p=reject) header.from=example.test"
        },
    )
    verdict = check_reply(
        msg,
        sender="mallory@example.test",
        token=SECRET,
        ref="pizzabot.d1.wrong@example.test",
        bot_address="bot@example.test",
        trust=TRUST,
    )
    assert len(verdict.problems) == 2
    assert "token" in verdict.problems[0]
    assert "DMARC" in verdict.problems[1]


@pytest.mark.parametrize(
    ("headers", "failure"),
    [
        ([], None),
        (["mx.example.test; dmarc=pass header.from=example.test"], None),
        (["mx.example.test; dmarc=fail (p=none) header.from=example.test"], "DMARC"),
        # The topmost header is our server's; an older one below it does not count.
        (
            [
                "mx.example.test; dmarc=pass header.from=example.test",
                "evil.test; dmarc=fail header.from=example.test",
            ],
            None,
        ),
        (
            [
                "mx.example.test; dmarc=fail header.from=example.test",
                "evil.test; dmarc=pass header.from=example.test",
            ],
            "DMARC",
        ),
        (["mx.example.test; spf=fail smtp.mailfrom=alice@example.test"], "SPF"),
        (["mx.example.test; spf=fail smtp.mailfrom=bounce@mailer.other.test"], None),
        (["mx.example.test; dkim=fail header.d=example.test; spf=none"], "DKIM"),
        (
            ["mx.example.test; dkim=fail header.d=example.test; dkim=pass header.d=example.test"],
            None,
        ),
        (["mx.example.test; dkim=pass header.i=@mail.example.test"], None),
        (["mx.example.test; none"], None),
        # DMARC speaks only for the domain it names; none/temperror never outweigh a failure.
        (
            [
                "mx.example.test; dmarc=none header.from=example.test; dkim=fail header.d=example.test"
            ],
            "DKIM",
        ),
        (["mx.example.test; dmarc=temperror; spf=fail smtp.mailfrom=a@example.test"], "SPF"),
        (
            [
                "mx.example.test; dmarc=pass header.from=evil.test; spf=fail smtp.mailfrom=a@example.test"
            ],
            "SPF",
        ),
        (["mx.example.test; dmarc=pass header.from=evil.test"], None),
        (["mx.example.test; dmarc=fail header.from=evil.test"], None),
        (["mx.example.test; dmarc=fail"], "DMARC"),
        (
            [
                "mx.example.test; dmarc=pass header.from=example.test; dkim=fail header.d=example.test"
            ],
            None,
        ),
    ],
)
def test_auth_results(headers: list[str], failure: str | None) -> None:
    msg = EmailMessage()
    for h in headers:
        msg["Authentication-Results"] = h
    got = auth_failure(msg, from_domain="example.test", authserv_id=None)
    assert (got is not None and failure is not None and failure in got) or got == failure


def test_auth_results_from_another_server_are_ignored_when_ours_is_named() -> None:
    msg = EmailMessage()
    msg["Authentication-Results"] = "evil.test; dmarc=pass header.from=example.test"
    msg["Authentication-Results"] = "mx.example.test; dmarc=fail header.from=example.test"
    assert auth_failure(msg, from_domain="example.test", authserv_id=None) is None
    assert auth_failure(msg, from_domain="example.test", authserv_id="mx.example.test")


def test_auth_results_parser_handles_comments_and_quotes() -> None:
    serv, results = parse_auth_results(
        'mx.google.com (v=1); dkim=pass (2048-bit key) header.i=@example.test header.s="s1"; '
        "spf=pass (google.com: domain of a@example.test designates 1.2.3.4) "
        "smtp.mailfrom=a@example.test; dmarc=pass (p=NONE sp=NONE dis=NONE) header.from=example.test"
    )
    assert serv == "mx.google.com"
    assert [(r.method, r.result) for r in results] == [
        ("dkim", "pass"),
        ("spf", "pass"),
        ("dmarc", "pass"),
    ]
    assert results[0].props["header.s"] == "s1"


@pytest.mark.parametrize(
    ("headers", "automatic"),
    [
        ({}, False),
        ({"Auto-Submitted": "no"}, False),
        ({"Auto-Submitted": "auto-replied"}, True),
        ({"Precedence": "bulk"}, True),
        ({"Return-Path": "<>"}, True),
        ({"X-Autoreply": "yes"}, True),
    ],
)
def test_machine_mail_is_recognised(headers: dict[str, str], automatic: bool) -> None:
    assert (is_automatic(reply(headers=headers)) is not None) == automatic


# --- composing -----------------------------------------------------------------------------


def parts(msg: EmailMessage) -> tuple[str, str]:
    again = email.message_from_bytes(msg.as_bytes(), policy=email.policy.default)
    assert isinstance(again, EmailMessage)
    plain = again.get_body(("plain",))
    html = again.get_body(("html",))
    assert isinstance(plain, EmailMessage) and isinstance(html, EmailMessage)
    return plain.get_content(), html.get_content()


def test_action_mail_says_the_same_in_text_and_html() -> None:
    msg = item_mail(
        item(),
        run(),
        identity=BOT,
        to="alice@example.test",
        message_id=ITEM_MID,
        thread=Thread(subject_for("test", run().input)),
        can_decide=True,
        token=SECRET,
        links=None,
        now=NOW,
    )
    text, html = parts(msg)
    for needle in ("crm.send_email", "I will mail Ann", "impact high", "cannot be undone"):
        assert needle in text and needle in html
    assert "ann@example.com" in text and "ann@example.com" in html
    assert "&lt;ann@example.com&gt; &amp; Bob" in html  # escaped, not markup
    assert "approve" in text and "reject REASON" in text and "edit" in text
    assert "copies (a whole number 1–10" in text
    assert msg["Subject"] == "[pizzabot] test: send Ann the quote"
    assert msg["Message-ID"] == ITEM_MID
    again = email.message_from_bytes(msg.as_bytes(), policy=email.policy.default)
    assert again["Reply-To"].addresses[0].addr_spec == f"bot+{SECRET}@example.test"
    assert again["In-Reply-To"] is None and again["Auto-Submitted"] == "auto-generated"


def test_later_mails_thread_under_the_first() -> None:
    earlier = [f"<m{n}@example.test>" for n in range(14)]
    thread = Thread.of("[pizzabot] test: x", earlier)
    msg = notice_mail(
        item(
            status=ItemStatus.REJECTED,
            decided_by="alice@example.test",
            decided_via="email",
            decided_at=NOW,
            reason="too early",
        ),
        identity=BOT,
        to="alice@example.test",
        message_id=BOT.notice_message_id("d1", "rejected"),
        thread=thread,
        now=NOW,
    )
    assert msg["In-Reply-To"] == "<m13@example.test>"
    refs = str(msg["References"]).split()
    assert refs[0] == "<m0@example.test>" and refs[-1] == "<m13@example.test>" and len(refs) == 10
    text, _html = parts(msg)
    assert "Rejected by alice@example.test via email" in text and "too early" in text


def test_non_approvers_get_no_instructions() -> None:
    msg = item_mail(
        item(),
        run(),
        identity=BOT,
        to="carol@example.test",
        message_id=BOT.item_message_id("d1", None),
        thread=Thread("s"),
        can_decide=False,
        token=SECRET,
        links=None,
        now=NOW,
    )
    text, _html = parts(msg)
    assert "reject REASON" not in text and "not an email approver" in text
    assert SECRET not in msg.as_string()  # no token: a reply from this copy decides nothing


def test_answer_threads_under_the_mail_it_answers() -> None:
    original = reply()
    original["Message-ID"] = "<their-1@example.test>"
    msg = answer_mail(
        original, identity=BOT, to="alice@example.test", text="nope", token=SECRET, now=NOW
    )
    assert msg["In-Reply-To"] == "<their-1@example.test>"
    assert str(msg["References"]).split() == [ITEM_MID, "<their-1@example.test>"]
    assert msg["Subject"] == "Re: [pizzabot] test: send Ann the quote"
    assert msg["Auto-Submitted"] == "auto-replied"


def test_subject_is_short_and_stable() -> None:
    long = "please " * 30
    assert subject_for("test", long) == subject_for("test", long)
    assert len(subject_for("test", long)) < 90
    assert subject_for("s", "") == "[pizzabot] s"


# --- links ---------------------------------------------------------------------------------


def test_a_signed_link_checks_out_until_it_expires() -> None:
    token = sign_link(
        KEY,
        item(),
        decision="approve",
        address="Alice@example.test",
        expires=NOW + timedelta(days=1),
    )
    claim = verify_link(KEY, token, now=NOW)
    assert (claim.item_id, claim.decision, claim.address) == ("i1", "approve", "alice@example.test")
    with pytest.raises(BadLink, match="expired"):
        verify_link(KEY, token, now=NOW + timedelta(days=2))


def test_a_tampered_link_or_another_key_fails() -> None:
    token = sign_link(
        KEY,
        item(),
        decision="approve",
        address="alice@example.test",
        expires=NOW + timedelta(days=1),
    )
    other = sign_link(
        KEY,
        item(),
        decision="reject",
        address="alice@example.test",
        expires=NOW + timedelta(days=1),
    )
    forged = other.split(".")[0] + "." + token.split(".")[1]
    with pytest.raises(BadLink):
        verify_link(KEY, forged, now=NOW)
    with pytest.raises(BadLink):
        verify_link(MailKey(b"another key" * 3), token, now=NOW)
    with pytest.raises(BadLink):
        verify_link(KEY, "garbage", now=NOW)


def _mail(*auth_results: str) -> EmailMessage:
    msg = EmailMessage()
    for header in auth_results:
        msg["Authentication-Results"] = header
    msg["From"] = "alice@example.test"
    return msg


@pytest.mark.parametrize(
    ("headers", "why"),
    [
        ([], "no Authentication-Results from mx.example.test"),
        (["mx.google.com; dmarc=pass header.from=example.test"], "from another server"),
        # Below our server's header anything may come from the sender: only the topmost counts.
        (
            [
                "mx.example.test; dmarc=fail header.from=example.test",
                "mx.example.test; dmarc=pass header.from=example.test",
            ],
            "DMARC failed",
        ),
        (["mx.example.test; dmarc=pass header.from=evil.test"], "no passing DMARC, DKIM or SPF"),
        (["mx.example.test; dkim=pass header.d=evil.test"], "no passing DMARC, DKIM or SPF"),
        (["mx.example.test; dmarc=none header.from=example.test"], "no passing"),
        (["mx.example.test; dmarc=pass"], "no passing"),  # names no domain: proves nothing
        (["mx.example.test; none"], "no passing"),
        (["mx.example.test; spf=fail smtp.mailfrom=a@example.test"], "SPF failed"),
        (["mx.example.test; dkim=pass header.d=example.test; dmarc=fail"], "DMARC failed"),
    ],
)
def test_under_the_default_rule_a_mail_is_believed_only_with_a_passing_aligned_verdict(
    headers: list[str], why: str
) -> None:
    got = authenticated(_mail(*headers), from_domain="example.test", trust=TRUST)
    assert got is not None and why in got


@pytest.mark.parametrize(
    "header",
    [
        "mx.example.test; dmarc=pass (p=reject) header.from=example.test",
        "MX.Example.Test; dmarc=pass header.from=Example.TEST",
        "mx.example.test; dkim=pass header.d=example.test; dmarc=none",
        "mx.example.test; dkim=pass header.i=@mail.example.test",
        "mx.example.test; spf=pass smtp.mailfrom=bounce@example.test",
        "mx.example.test; dmarc=pass header.from=example.test; dkim=fail header.d=example.test",
    ],
)
def test_a_passing_aligned_verdict_from_our_server_is_believed(header: str) -> None:
    got = authenticated(_mail(header), from_domain="example.test", trust=TRUST)
    assert got is None


def test_without_an_authserv_id_the_default_rule_believes_no_mail() -> None:
    closed = MailTrust()
    assert closed.closed and not TRUST.closed and not MailTrust(rule="mailbox").closed
    got = authenticated(_mail(PASSED), from_domain="example.test", trust=closed)
    assert got is not None and "which receiving server" in got


def test_the_mailbox_rule_refuses_only_a_verdict_that_says_forged() -> None:
    mailbox = MailTrust(rule="mailbox")
    assert authenticated(_mail(), from_domain="example.test", trust=mailbox) is None
    assert authenticated(_mail(PASSED), from_domain="example.test", trust=mailbox) is None
    forged = _mail("mx.example.test; dmarc=fail header.from=example.test")
    got = authenticated(forged, from_domain="example.test", trust=mailbox)
    assert got is not None and "DMARC failed" in got


@pytest.mark.parametrize(
    ("header", "from_domain", "believed"),
    [
        # A public suffix vouches for nobody beneath it.
        ("mx.example.test; dkim=pass header.d=co.uk", "victim.co.uk", False),
        ("mx.example.test; dmarc=pass header.from=github.io", "victim.github.io", False),
        ("mx.example.test; dkim=pass header.d=evil.github.io", "victim.github.io", False),
        # One organization's subdomains vouch for each other, as RFC 7489's relaxed mode says.
        ("mx.example.test; dkim=pass header.d=mail.corp.co.uk", "corp.co.uk", True),
        ("mx.example.test; spf=pass smtp.mailfrom=b@bounce.corp.co.uk", "sales.corp.co.uk", True),
    ],
)
def test_alignment_is_by_organizational_domain(
    header: str, from_domain: str, believed: bool
) -> None:
    got = authenticated(_mail(header), from_domain=from_domain, trust=TRUST)
    assert (got is None) is believed, got
