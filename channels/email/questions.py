"""Question items by mail: the mail that asks, and a reply read back as an answer.

A question mail says what is asked, lists the fields with what each accepts, and how to
answer: one `field: value` line per field (a question in words takes the reply's text as it
is), or "decline" and, if the person likes, why. A link question (URL mode) names the domain
the link leads to and the link itself, and asks for "done" once the person has been there, or
"decline". No signed decision links: a question is answered by reply or on the web page.

A reply becomes one of the decisions every channel sends (`pizzabot.agent.questions`): `Edit` with the
typed values (read as the web form reads them, `pizzabot.agent.questions.values_from_lines`),
`Approve` (done; or the proposed values as they are), `Reject` (declined). What cannot be
read, or does not fit the form, is answered with what is wrong, field by field, and decides
nothing.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pizzabot.agent.argforms import Field, form_fields
from pizzabot.agent.model import Approve, Decision, Edit, Item, ItemStatus, Reject
from pizzabot.agent.questions import question_url, read_link, values_from_lines
from pizzabot.channels.email.signoffs import without_sign_off

__all__ = [
    "Reading",
    "answer_errors",
    "no_answer",
    "question_html",
    "question_outcome",
    "question_text",
    "read_answer",
]

_DONE_WORDS = frozenset({"done", "accept", "accepted", "approve", "approved", "yes", "ok", "okay"})
#: Accepting a form's proposed values as they are: not "yes", which may be a field's answer.
_ACCEPT_WORDS = frozenset({"ok", "okay", "accept", "accepted"})
_DECLINE = re.compile(
    r"^\s*(?:decline|declined)\b(?P<sep>\s*[:.,!\-–—]?)(?P<rest>.*)$", re.IGNORECASE | re.DOTALL
)
_WORD_ONLY = re.compile(
    r"^\s*(?P<word>[A-Za-z]+)[\s.!,👍✅]*(please|thanks|thank you|thx)?[\s.!👍✅]*$",
    re.IGNORECASE,
)
_GREETING = re.compile(r"^\s*(hi|hello|hey|dear|hallo|bonjour|hola)\b[^\n]{0,40}$", re.IGNORECASE)
_KEY = re.compile(r"^\s*(?:[-*•]\s*)?(?P<key>[A-Za-z_][\w .\-]{0,60}?)\s*:")


# --- the mail that asks ------------------------------------------------------------------


def _accepts(f: Field) -> str:
    labels = dict(f.labelled_options())

    def choice(o: str) -> str:
        return o if labels.get(o, o) == o else f"{o} ({labels[o]})"

    what = {
        "email": "an email address",
        "uri": "a link (https://…)",
        "date": "a date, YYYY-MM-DD",
        "date-time": "a date and time with its zone, e.g. 2026-12-24T19:30:00Z",
    }.get(f.format or "", "text")
    match f.kind:
        case "number" | "integer":
            what = "a number" if f.kind == "number" else "a whole number"
            if f.minimum is not None:
                what += f" from {f.minimum:g}"
            if f.maximum is not None:
                what += f" to {f.maximum:g}"
        case "checkbox":
            what = "yes or no"
        case "select":
            what = "one of: " + ", ".join(choice(o) for o in f.options)
        case "multiselect":
            what = "any of: " + ", ".join(choice(o) for o in f.options)
            what += " (separate them with commas)"
        case "json":
            what = "JSON"
    if f.max_length is not None and f.kind in {"text", "textarea"}:
        what += f", at most {f.max_length} characters"
    return what + ("; required" if f.required else "; optional")


def _field_lines(fields: list[Field]) -> list[str]:
    lines: list[str] = []
    for f in fields:
        named = f.name if f.label.casefold() == f.name.casefold() else f"{f.name} ({f.label})"
        lines.append(f"  {named}: {_accepts(f)}")
        if f.description:
            lines.append(f"      {f.description}")
    return lines


def _sample(f: Field) -> str:
    if isinstance(f.value, str) and f.value and f.kind != "multiselect":
        return f.value
    match f.kind:
        case "checkbox":
            return "yes"
        case "select" | "multiselect":
            return ", ".join(f.options[:2]) if f.kind == "multiselect" else f.options[0]
        case "number" | "integer":
            return f"{f.minimum:g}" if f.minimum is not None else "1"
    return {"date": "2026-12-24", "email": "ann@example.com"}.get(f.format or "", "…")


def _free_text(fields: list[Field]) -> bool:
    return len(fields) == 1 and fields[0].kind in {"text", "textarea"} and not fields[0].format


def _values(item: Item, values: Mapping[str, Any]) -> list[str]:
    labels = {f.name: f for f in form_fields(item.schema or {}, {})}
    lines: list[str] = []
    for name, value in values.items():
        f = labels.get(name)
        titles = dict(f.labelled_options()) if f is not None else {}
        if isinstance(value, bool):
            shown = "yes" if value else "no"
        elif isinstance(value, list):
            shown = ", ".join(titles.get(str(v), str(v)) for v in value) or "(none)"
        elif isinstance(value, str):
            shown = titles.get(value, value)
        else:
            shown = json.dumps(value, ensure_ascii=False)
        lines.append(f"  {name}: {shown}")
    return lines


def _how_to(item: Item) -> list[str]:
    url = question_url(item)
    if url is not None:
        return [
            'When you have finished there, reply to this mail with "done" on the first line.',
            'To decline, reply "decline" and, if you like, why.',
        ]
    fields = form_fields(item.schema or {}, item.args or {})
    if _free_text(fields):
        return [
            "To answer, reply to this mail: your text above the quoted mail is the answer.",
            'To decline, reply with "decline" alone on the first line (why, if you like, on '
            'the next lines), or "decline: why".',
        ]
    lines = ['To answer, reply to this mail with one "field: value" line per field, e.g.']
    lines += [f"  {f.name}: {_sample(f)}" for f in fields[:2]]
    if item.args:
        lines.append('Fields you leave out keep the proposed values; "ok" accepts them all.')
    lines += ['To decline, reply "decline" and, if you like, why.', "", "Fields:"]
    return lines + _field_lines(fields)


def _link_lines(url: str) -> list[str]:
    link = read_link(url)
    if isinstance(link, str):
        # Not even shown: a mail program would make the text a link that opens elsewhere.
        return [f"The question asks you to open a link that is not offered: {link}."]
    return [
        f"The link leads to: {link.where}",
        f"  {link.href}",
        "Open it only if you expected this request: it is the asker's link, not Pizza Bot's.",
    ]


def _said_in_title(item: Item) -> bool:
    return not item.body.strip() or item.body.strip() in item.title


def question_text(item: Item, *, can_decide: bool, page: str | None) -> list[str]:
    """A question mail's text (before its footer)."""
    lines = [item.title, ""]
    if not _said_in_title(item):
        lines += [*item.body.strip().split("\n"), ""]
    url = question_url(item)
    if url is not None:
        lines += [*_link_lines(url), ""]
    elif item.args:
        lines += ["Proposed answer:", *_values(item, item.args), ""]
    if can_decide:
        lines += _how_to(item)
        if page:
            lines += ["", f"Or answer on the web inbox: {page}"]
    else:
        lines.append(
            "This mail is for your information: your address is not an email approver of "
            f"skill {item.skill}, so a reply from it cannot answer."
        )
    return lines


def question_html(item: Item, *, can_decide: bool, page: str | None) -> list[str]:
    """A question mail's HTML blocks (before its footer): the same as its text."""
    e = html.escape
    blocks = [
        f"<h2>{e(item.title)}</h2>",
    ]
    if not _said_in_title(item):
        blocks.append(
            f"<blockquote style='white-space:pre-wrap'>{e(item.body.strip())}</blockquote>"
        )
    url = question_url(item)
    if url is not None:
        # The link is shown as text, never as an anchor: the person reads where it goes
        # (the domain, in bold) before they copy or click it in their own time.
        link = read_link(url)
        if isinstance(link, str):
            blocks.append(
                f"<p>The question asks you to open a link that is not offered: {e(link)}.</p>"
            )
        else:
            host = "" if link.host == link.domain else f" (host {e(link.host)})"
            blocks.append(
                f"<p>The link leads to: <b>{e(link.domain)}</b>{host}<br>"
                f"<code>{e(link.href)}</code><br>"
                "Open it only if you expected this request: it is the asker's link, not Pizza "
                "Bot's.</p>"
            )
    rest = _how_to(item) if can_decide else question_text(item, can_decide=False, page=None)[-1:]
    blocks.append(f"<pre style='white-space:pre-wrap'>{e(chr(10).join(rest))}</pre>")
    if can_decide and page:
        blocks.append(f"<p>Or answer on the <a href='{e(page)}'>web inbox</a>.</p>")
    return blocks


def question_outcome(item: Item) -> str:
    """How a question ended, for the notice mailed into its thread."""
    who = f"{item.decided_by} via {item.decided_via}"
    at = item.decided_at.strftime("%Y-%m-%d %H:%M UTC") if item.decided_at else "earlier"
    match item.status:
        case ItemStatus.APPROVED | ItemStatus.EDITED:
            if question_url(item) is not None:
                return f"Done by {who} at {at}."
            values = item.final_args if item.final_args is not None else item.args
            return "\n".join([f"Answered by {who} at {at}:", *_values(item, values or {})])
        case ItemStatus.REJECTED:
            return f"Declined by {who} at {at}." + (
                f" Reason: {item.reason}" if item.reason else ""
            )
        case ItemStatus.EXPIRED:
            return "Expired: nobody answered in time" + (
                f" ({item.reason})." if item.reason else "."
            )
        case ItemStatus.CANCELLED:
            return "Closed: the question was withdrawn before anyone answered."
        case _:
            return f"Now {item.status}."


# --- a reply read back -------------------------------------------------------------------


@dataclass(frozen=True)
class Reading:
    """What a reply to a question says: a decision, or errors by field (`""`: about the
    reply as a whole), or neither (no answer found)."""

    decision: Decision | None = None
    errors: dict[str, str] = field(default_factory=dict)


def _lines(top: str) -> list[str]:
    lines = top.replace("\r\n", "\n").split("\n")
    while lines and not lines[0].strip():
        lines.pop(0)
    if len(lines) > 1 and _GREETING.match(lines[0]):
        lines.pop(0)
        while lines and not lines[0].strip():
            lines.pop(0)
    return lines


def _declined(lines: list[str], *, free_text: bool) -> Reject | None:
    found = _DECLINE.match(lines[0]) if lines else None
    if found is None:
        return None
    first, sep = found.group("rest").strip(), found.group("sep").strip()
    if free_text and first and not sep:
        return None  # "Decline the offer" may be the answer itself
    return Reject(without_sign_off("\n".join([first, *lines[1:]]).strip()))


def _only_word(lines: list[str]) -> str | None:
    rest = [x for x in lines[1:] if x.strip()]
    word = _WORD_ONLY.match(lines[0]) if lines else None
    if word is None or without_sign_off("\n".join(rest)).strip():
        return None
    return word.group("word").casefold()


def read_answer(item: Item, top: str) -> Reading:
    """The answer in a reply's own text (above the quote) to the question `item`."""
    lines = _lines(top)
    fields = form_fields(item.schema or {}, item.args or {})
    free = question_url(item) is None and _free_text(fields)
    declined = _declined(lines, free_text=free)
    if declined is not None:
        return Reading(declined)
    if question_url(item) is not None:
        return Reading(Approve() if _only_word(lines) in _DONE_WORDS else None)
    if not free and item.args and _only_word(lines) in _ACCEPT_WORDS:
        return Reading(Approve())  # the proposed values, as they are
    text = without_sign_off("\n".join(lines)).strip()
    if not text:
        return Reading()
    known = {f.name.casefold() for f in fields} | {f.label.casefold() for f in fields}
    keys = [m.group("key").strip() for m in map(_KEY.match, text.split("\n")) if m]
    if not free:
        names = ", ".join(f.name for f in fields)
        unknown = {k: f"no such field; the fields are {names}" for k in keys}
        errors = {k: v for k, v in unknown.items() if k.casefold() not in known}
        if errors:
            return Reading(errors=errors)
        if not keys:
            return Reading()
    values, errors = values_from_lines(item.schema or {}, text, item.args)
    return Reading(errors=errors) if errors else Reading(Edit(values))


def answer_errors(item: Item, errors: Mapping[str, str]) -> str:
    """The answer mail to a reply whose values do not fit: what is wrong, field by field."""
    lines = ["Your answer was not taken; the question still waits for one.", ""]
    lines += [f"- {name or 'answer'}: {message}" for name, message in errors.items()]
    return "\n".join([*lines, "", *_how_to(item)])


def no_answer(item: Item) -> str:
    """The answer mail to a reply in which no answer was found."""
    return "\n".join(["No answer was found in your reply; nothing changed.", "", *_how_to(item)])
