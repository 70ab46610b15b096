"""Building the mails the bot sends: an item in its run's thread, a decision's outcome, an
answer to a reply. Plain text and HTML say the same thing.

Threading: every mail of a run (to one address) is one thread. The first item's mail starts
it; later ones carry `In-Reply-To` (the previous mail) and `References` (the first one and
the latest few) and keep the same subject, which is what Gmail, Outlook and Apple Mail group
by. A Message-ID is made from the delivery's id, so a resend after an SMTP error is the same
message to the recipient's client. An approver's copy carries that approver's own reply
token (in the Message-ID and the `Reply-To` plus-address), so that a reply from any client
proves its writer received that mail (see `trust`); a copy to anyone else carries none.

Every header is built by `headers` from cleaned text (the subject from a run's input, an
answered mail's Subject and Message-IDs): no outside text reaches `email` as a raw value.
"""

from __future__ import annotations

import html
import json
import re
from dataclasses import dataclass
from datetime import datetime
from email.message import EmailMessage
from email.policy import SMTP
from email.utils import format_datetime, make_msgid
from typing import Any

from pizzabot.agent.argforms import Field, form_fields
from pizzabot.agent.model import MAY_HAVE_HAPPENED, Box, Item, ItemKind, ItemStatus, Run
from pizzabot.agent.undo import undo_line
from pizzabot.channels.email import headers
from pizzabot.channels.email.headers import Folded
from pizzabot.channels.email.previews import preview_html, preview_lines
from pizzabot.channels.email.questions import question_html, question_outcome, question_text
from pizzabot.channels.email.trust import message_ids
from pizzabot.channels.email.unread import unread_html, unread_text

SUBJECT_TAG = "[pizzabot]"
_MAX_REFERENCES = 10


@dataclass(frozen=True)
class MailIdentity:
    """Who the bot is in mail: its address, display name, and whether replies go to
    `bot+<token>@…` (plus-addressing; nearly every provider supports it)."""

    address: str
    name: str = "Pizza Bot"
    plus_address: bool = True

    @property
    def local(self) -> str:
        return self.address.rpartition("@")[0]

    @property
    def domain(self) -> str:
        return self.address.rpartition("@")[2].lower()

    def sender(self) -> Folded:
        return headers.mailbox("From", self.address, self.name)

    def reply_to(self, token: str | None) -> Folded:
        """Where a reply goes: `bot+<token>@…` for a recipient who may decide."""
        if not token or not self.plus_address:
            return headers.mailbox("Reply-To", self.address, self.name)
        return headers.mailbox("Reply-To", f"{self.local}+{token}@{self.domain}", self.name)

    def item_message_id(self, delivery_id: str, token: str | None) -> str:
        if not token:
            return f"<pizzabot.{delivery_id}.info@{self.domain}>"
        return f"<pizzabot.{delivery_id}.{token}@{self.domain}>"

    def notice_message_id(self, delivery_id: str, status: str) -> str:
        return f"<pizzabot.{delivery_id}.{status}.notice@{self.domain}>"

    def is_mine(self, address: str) -> bool:
        """True for the bot's address and its plus-addresses."""
        local, _, domain = address.lower().rpartition("@")
        return domain == self.domain and local.split("+", 1)[0] == self.local.lower()


@dataclass(frozen=True)
class Thread:
    subject: str
    in_reply_to: str | None = None
    references: tuple[str, ...] = ()

    @staticmethod
    def of(subject: str, earlier: list[str]) -> Thread:
        """The thread after the mails `earlier` (Message-IDs, oldest first)."""
        if not earlier:
            return Thread(subject)
        refs = earlier if len(earlier) <= _MAX_REFERENCES else [earlier[0], *earlier[-9:]]
        return Thread(subject, in_reply_to=earlier[-1], references=tuple(refs))


@dataclass(frozen=True)
class Links:
    """Signed one-time links to the confirm pages, and when they stop working."""

    approve: str
    reject: str
    edit: str | None
    expires: datetime
    page: str | None = None  # the item on the web inbox (needs a login there)
    undo: str | None = None  # a `notify` FYI's Undo (`pizzabot.channels.email.undo_links`)


def subject_for(skill: str, run_input: str) -> str:
    """`[pizzabot] <skill>: <first line of the run's input, short>`, stable for the run."""
    first = next((line.strip() for line in run_input.splitlines() if line.strip()), "")
    first = headers.clean(first, limit=60)
    skill = headers.clean(skill, limit=60)
    return f"{SUBJECT_TAG} {skill}: {first}" if first else f"{SUBJECT_TAG} {skill}"


def _base(
    *, identity: MailIdentity, to: str, thread: Thread, message_id: str, now: datetime
) -> EmailMessage:
    msg = EmailMessage(policy=SMTP)
    msg["From"] = identity.sender()
    msg["To"] = headers.mailbox("To", to)
    msg["Subject"] = headers.unstructured("Subject", thread.subject)
    msg["Date"] = headers.atom("Date", format_datetime(now))
    msg["Message-ID"] = headers.msg_ids("Message-ID", [message_id])
    if thread.in_reply_to:
        msg["In-Reply-To"] = headers.msg_ids("In-Reply-To", [thread.in_reply_to])
        msg["References"] = headers.msg_ids(
            "References", list(thread.references or (thread.in_reply_to,))
        )
    return msg


def _when(moment: datetime | None) -> str:
    return moment.strftime("%Y-%m-%d %H:%M UTC") if moment else "earlier"


def _risk(item: Item) -> str:
    risk = item.risk
    parts: list[str] = []
    if risk.may_have_happened:
        parts.append(MAY_HAVE_HAPPENED)
    if risk.impact:
        parts.append(f"impact {risk.impact}")
    if risk.reversible is not None:
        parts.append("can be undone" if risk.reversible else "cannot be undone")
    if risk.scope:
        parts.append(f"scope {risk.scope}")
    if risk.hints:
        # The tool server's own annotations, shown only where the skill gives no notes.
        parts.append(f"the tool says {', '.join(risk.hints)} (not checked)")
    return "; ".join(parts) or "no notes"


def _value(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _args_text(args: dict[str, Any] | None) -> list[str]:
    if not args:
        return ["  (none)"]
    out: list[str] = []
    for name, value in args.items():
        text = _value(value)
        if "\n" in text:
            out.append(f"  {name}:")
            out.extend(f"    {line}" for line in text.split("\n"))
        else:
            out.append(f"  {name}: {text}")
    return out


def _field_hint(f: Field) -> str:
    kind = {
        "text": "text",
        "textarea": "text",
        "number": "a number",
        "integer": "a whole number",
        "checkbox": "yes or no",
        "select": "one of " + ", ".join(f.options),
        "json": "JSON",
    }[f.kind]
    bounds = ""
    if f.minimum is not None and f.maximum is not None:
        bounds = f" {f.minimum:g}–{f.maximum:g}"
    elif f.minimum is not None:
        bounds = f" ≥ {f.minimum:g}"
    elif f.maximum is not None:
        bounds = f" ≤ {f.maximum:g}"
    optional = "" if f.required else ", optional"
    return f"{f.name} ({kind}{bounds}{optional})"


def _instructions(item: Item) -> list[str]:
    if item.kind is ItemKind.BUDGET:
        return [
            "To decide, reply to this mail with your answer on the first line:",
            "  approve          extend the budget and go on",
            "  reject REASON    stop the run",
        ]
    fields = form_fields(item.schema or {}, item.args or {})
    example = next((f for f in fields if f.kind in {"integer", "number", "text"}), None)
    sample = f"{example.name}: {example.value or '…'}" if example else "name: value"
    return [
        "To decide, reply to this mail with your answer on the first line:",
        "  approve          run it as proposed (yes, ok and lgtm work too)",
        "  approve all      also every other call the agent asked for with this one",
        "  reject REASON    do not run it; the agent reads your reason",
        '  edit             then one "name: value" line per field to change, e.g.',
        f"                     {sample}",
        '                   or a JSON object, e.g. edit {"name": "value"};',
        "                   fields you leave out keep their value.",
        "Fields: " + " · ".join(_field_hint(f) for f in fields),
    ]


def _link_lines(links: Links) -> list[str]:
    lines = [
        "Or open a link (it asks before it decides; each works once, until "
        f"{_when(links.expires)}):",
        f"  Approve: {links.approve}",
        f"  Reject:  {links.reject}",
    ]
    if links.edit:
        lines.append(f"  Edit:    {links.edit}")
    if links.page:
        lines.append(f"The item on the web inbox: {links.page}")
    return lines


def _heading(item: Item) -> tuple[str, str]:
    """An action's heading and what its body is: an outside agent's request is worded as its
    request, not as a run of the skill's model."""
    if item.requested:
        return f"{item.requested_by} asks: {item.title}", "The request"
    if item.kind is ItemKind.TOOL:
        return f"{item.skill} wants to run {item.tool}", "What the run is doing"
    return item.title, "What the run is doing"


def _item_text(item: Item, run: Run, *, can_decide: bool, links: Links | None) -> list[str]:
    if item.kind is ItemKind.QUESTION:
        return question_text(item, can_decide=can_decide, page=links.page if links else None)
    if item.box is Box.UNREAD:
        return unread_text(item, can_decide=can_decide, undo_link=links.undo if links else None)
    heading, doing = _heading(item)
    lines = [heading, "", f"{doing}:"]
    lines += [f"  {line}" for line in (item.body.strip() or run.input).split("\n")]
    lines.append("")
    if item.kind is ItemKind.TOOL:
        lines += [f"Tool: {item.tool}", f"Risk: {_risk(item)}"]
        if item.requested_by:
            lines.append(f"Requested by: {item.requested_by}")
        if item.risk.rule:
            lines.append(f"Asked by: {item.risk.rule}")
        if item.risk.approvals_text:
            lines.append(f"Approvals: {item.risk.approvals_text}")
        lines += [f"{label}: {text}" for label, text in item.risk.timing()]
        lines += [*preview_lines(item), "", "Proposed arguments:"]
    else:
        lines.append("Extension:")
    lines += _args_text(item.args)
    lines.append("")
    if can_decide:
        lines += _instructions(item)
        if links is not None:
            lines += ["", *_link_lines(links)]
    else:
        lines.append(
            "This mail is for your information: your address is not an email approver of "
            f"skill {item.skill}, so a reply from it cannot decide."
        )
    return lines


def _footer(item: Item) -> str:
    return f"Pizza Bot · run {item.run_id} · item {item.id}"


_STYLE = "font-family:system-ui,-apple-system,Segoe UI,sans-serif;font-size:14px;color:#222"


def _html_page(blocks: list[str]) -> str:
    return f'<!doctype html><html><body style="{_STYLE}">' + "".join(blocks) + "</body></html>"


def _p(text: str) -> str:
    return f"<p>{html.escape(text).replace(chr(10), '<br>')}</p>"


def _item_html(item: Item, run: Run, *, can_decide: bool, links: Links | None) -> str:
    e = html.escape
    blocks: list[str] = []
    if item.kind is ItemKind.QUESTION:
        page = links.page if links else None
        blocks = question_html(item, can_decide=can_decide, page=page)
    elif item.box is Box.UNREAD:
        blocks = unread_html(item, can_decide=can_decide, undo_link=links.undo if links else None)
    else:
        heading, doing = _heading(item)
        blocks.append(f"<h2>{e(heading)}</h2>")
        blocks.append(f"<p><b>{e(doing)}:</b></p>")
        body = item.body.strip() or run.input
        blocks.append(f"<blockquote style='white-space:pre-wrap'>{e(body)}</blockquote>")
        if item.kind is ItemKind.TOOL:
            blocks.append(f"<p><b>Tool:</b> <code>{e(item.tool or '')}</code><br>")
            asked = f"<br><b>Requested by:</b> {e(item.requested_by)}" if item.requested_by else ""
            asked += f"<br><b>Asked by:</b> {e(item.risk.rule)}" if item.risk.rule else ""
            count = item.risk.approvals_text
            asked += f"<br><b>Approvals:</b> {e(count)}" if count else ""
            asked += "".join(f"<br><b>{k}:</b> {e(v)}" for k, v in item.risk.timing())
            blocks.append(f"<b>Risk:</b> {e(_risk(item))}{asked}</p>{preview_html(item)}")
            blocks.append("<p><b>Proposed arguments:</b></p>")
        else:
            blocks.append("<p><b>Extension:</b></p>")
        rows = "".join(
            f"<tr><td style='padding:2px 12px 2px 0;vertical-align:top'><code>{e(k)}</code></td>"
            f"<td style='white-space:pre-wrap'>{e(_value(v))}</td></tr>"
            for k, v in (item.args or {}).items()
        )
        blocks.append(f"<table>{rows}</table>" if rows else "<p>(none)</p>")
        if can_decide:
            blocks.append(
                f"<pre style='white-space:pre-wrap'>{e(chr(10).join(_instructions(item)))}</pre>"
            )
            if links is not None:
                anchors = [f"<a href='{e(links.approve)}'>Approve</a>"]
                anchors.append(f"<a href='{e(links.reject)}'>Reject</a>")
                if links.edit:
                    anchors.append(f"<a href='{e(links.edit)}'>Edit</a>")
                if links.page:
                    anchors.append(f"<a href='{e(links.page)}'>web inbox</a>")
                blocks.append(
                    "<p>Or open a link (it asks before it decides; each works once, until "
                    f"{e(_when(links.expires))}): {' · '.join(anchors)}</p>"
                )
        else:
            blocks.append(
                _p(
                    "This mail is for your information: your address is not an email "
                    f"approver of skill {item.skill}, so a reply from it cannot decide."
                )
            )
    blocks.append(f"<p style='color:#777;font-size:12px'>{e(_footer(item))}</p>")
    return _html_page(blocks)


def item_mail(
    item: Item,
    run: Run,
    *,
    identity: MailIdentity,
    to: str,
    message_id: str,
    thread: Thread,
    can_decide: bool,
    token: str | None,
    links: Links | None,
    now: datetime,
) -> EmailMessage:
    """An item (an action to decide, or a finished run's result) as a mail in its thread.

    `token` is this recipient's reply token; it goes out only when they `can_decide`."""
    msg = _base(identity=identity, to=to, thread=thread, message_id=message_id, now=now)
    msg["Reply-To"] = identity.reply_to(token if can_decide else None)
    # RFC 3834: tells auto-responders (vacation notices) not to answer.
    msg["Auto-Submitted"] = headers.atom("Auto-Submitted", "auto-generated")
    msg["X-Pizzabot-Item"] = headers.atom("X-Pizzabot-Item", item.id)
    msg["X-Pizzabot-Run"] = headers.atom("X-Pizzabot-Run", item.run_id)
    text = _item_text(item, run, can_decide=can_decide, links=links)
    msg.set_content("\n".join([*text, "", "-- ", _footer(item)]) + "\n")
    msg.add_alternative(_item_html(item, run, can_decide=can_decide, links=links), subtype="html")
    return msg


def outcome_text(item: Item) -> str:
    """One sentence on how an action ended: who decided what, through which channel, when
    (an FYI: how its Undo went)."""
    if item.kind is ItemKind.QUESTION:
        return question_outcome(item)
    if item.undo is not None and item.undo.state != "offered":
        return undo_line(item.undo)  # an FYI's Undo, clicked
    who = f"{item.decided_by} via {item.decided_via} at {_when(item.decided_at)}"
    count = f" ({item.risk.approvals_text})" if item.risk.approvals_text else ""
    match item.status:
        case ItemStatus.PENDING if count:
            args = "\n".join([*_args_text(item.args), *preview_lines(item)])
            return f"Waiting for more approvals{count}. It would run with:\n{args}"
        case ItemStatus.APPROVED:
            return f"Approved by {who}{count}."
        case ItemStatus.EDITED:
            args = "\n".join(_args_text(item.final_args))
            return f"Edited and approved by {who}{count}. It runs with:\n{args}"
        case ItemStatus.REJECTED:
            reason = f" Reason: {item.reason}" if item.reason else ""
            return f"Rejected by {who}.{reason}"
        case ItemStatus.EXPIRED:
            reason = f" ({item.reason})" if item.reason else ""
            return f"Expired: nobody decided in time{reason}."
        case ItemStatus.CANCELLED:
            reason = f" ({item.reason})" if item.reason else ""  # e.g. withdrawn by …
            return f"Closed: the run ended before anyone decided{reason}."
        case _:
            return f"Now {item.status}."


def notice_mail(
    item: Item,
    *,
    identity: MailIdentity,
    to: str,
    message_id: str,
    thread: Thread,
    now: datetime,
    token: str | None = None,
) -> EmailMessage:
    """The outcome of an action, in its thread, so every copy shows how it ended; or a count
    still open, whose notice carries an approver's `token` (a reply to it decides)."""
    msg = _base(identity=identity, to=to, thread=thread, message_id=message_id, now=now)
    if token:
        msg["Reply-To"] = identity.reply_to(token)
    msg["Auto-Submitted"] = headers.atom("Auto-Submitted", "auto-generated")
    msg["X-Pizzabot-Item"] = headers.atom("X-Pizzabot-Item", item.id)
    msg["X-Pizzabot-Run"] = headers.atom("X-Pizzabot-Run", item.run_id)
    text = f"{item.title}\n\n{outcome_text(item)}"
    msg.set_content(f"{text}\n\n-- \n{_footer(item)}\n")
    msg.add_alternative(
        _html_page(
            [_p(text), f"<p style='color:#777;font-size:12px'>{html.escape(_footer(item))}</p>"]
        ),
        subtype="html",
    )
    return msg


def _re(subject: str) -> str:
    return subject if re.match(r"^\s*re\s*:", subject, re.IGNORECASE) else f"Re: {subject}"


def _valid_ids(values: list[str]) -> list[str]:
    """The well-formed Message-IDs among `values`: the rest of a mail's threading headers
    is the sender's text, and is not written back."""
    out: list[str] = []
    for found in values:
        try:
            out.append(headers.msg_id(f"<{found}>"))
        except headers.HeaderError:
            continue
    return out


def answer_mail(
    original: EmailMessage,
    *,
    identity: MailIdentity,
    to: str,
    text: str,
    token: str | None,
    now: datetime,
) -> EmailMessage:
    """The bot's answer to a mail it received (an error, a refusal, an acknowledgement).

    `token` is the recipient's reply token for the item the mail was about (None: a reply
    to the answer decides nothing)."""
    their_ids = _valid_ids(message_ids(str(original.get("Message-ID", ""))))
    their_id = their_ids[0] if their_ids else None
    refs = _valid_ids(message_ids(str(original.get("References", ""))))
    if their_id:
        refs.append(their_id)
    subject = headers.clean(str(original.get("Subject", "")))
    thread = Thread(
        _re(subject or SUBJECT_TAG),
        in_reply_to=their_id,
        references=tuple(refs[-_MAX_REFERENCES:]),
    )
    message_id = make_msgid(idstring="pizzabot-answer", domain=identity.domain)
    msg = _base(identity=identity, to=to, thread=thread, message_id=message_id, now=now)
    msg["Reply-To"] = identity.reply_to(token)
    msg["Auto-Submitted"] = headers.atom("Auto-Submitted", "auto-replied")
    msg.set_content(f"{text}\n\n-- \nPizza Bot\n")
    return msg
