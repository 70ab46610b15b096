"""Block Kit for question items: a card that asks a person for an answer, not an approval.

A question is answered in a modal built from its schema (the edit modal's machinery: the
same fields, the same submit, an `Edit` with the typed values), or declined with an optional
reason (the reject modal's submit). A free-text question is one multiline field. In URL mode
the person is sent to a web page (a sign-in, a payment): the card shows the domain in bold
and the full link, and, since Slack opens a URL button without asking, says what opening it
means before anyone clicks; "Done" accepts, "Decline" declines.

Everything in a question is the asker's text (a tool server's or another agent's): it is
escaped like every other text, and the link goes into mrkdwn only percent-encoded so that it
cannot end the link early and add text or a mention of its own.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from typing import Any
from urllib.parse import quote

from pizzabot.agent.argforms import Field, form_fields
from pizzabot.agent.model import Item, ItemStatus
from pizzabot.agent.questions import Link, question_url, read_link
from pizzabot.channels.slack.modals import FormWords, ModalRef, form_modal, reason_modal
from pizzabot.channels.slack.mrkdwn import clip, context, esc, item_url, link, plain, section, when
from pizzabot.channels.slack.mrkdwn import who as who_text

__all__ = [
    "ANSWER",
    "DECLINE",
    "DONE",
    "OPEN_LINK",
    "answer_modal",
    "decline_modal",
    "question_blocks",
    "question_buttons",
    "question_decided",
]

#: action_id of a question card's buttons. Done accepts: it is the card's Approve (spelled
#: out here because `cards` imports this module; a test checks they agree). Decline opens
#: the reject modal's twin; Open link is a URL button, which Slack also reports to the app.
ANSWER = "pizza_answer"
DECLINE = "pizza_decline"
DONE = "pizza_approve"
OPEN_LINK = "pizza_open_link"

_BODY_CUT = 1500
_VALUE_CUT = 280
_ANSWER_BUDGET = 2600
_BUTTON_URL_MAX = 3000
_LINK_MAX = 2400  # a link in a section (3,000 characters, with the domain line around it)

_ANSWER_WORDS = FormWords(
    title="Answer",
    submit="Send",
    too_many="This question has too many fields for a Slack form.",
    nothing="Nothing here can be answered in a Slack form.",
    on_the_web="Answer it on the web page",
)


def _encoded(link: Link) -> str:
    """The address the browser opens, with what would end or break a Slack link (`|`, `<`,
    `>`, quotes) percent-encoded; what is already encoded stays as it is."""
    return quote(link.href, safe="!#$%&'()*+,-./:;=?@[]_~")


def _safe_url(link: Link) -> str:
    """The link as mrkdwn may hold it inside `<…|…>` (`&` escaped as Slack asks)."""
    return _encoded(link).replace("&", "&amp;")


def _labels(item: Item) -> dict[str, str]:
    return {f.name: f.label for f in form_fields(item.schema or {}, {})}


def _titles(item: Item, name: str) -> dict[str, str]:
    """A titled enum's titles by value text (`oneOf` of `const` + `title`, also as the
    items of a multi-select)."""
    props = (item.schema or {}).get("properties")
    node = props.get(name) if isinstance(props, Mapping) else None
    if not isinstance(node, Mapping):
        return {}
    if isinstance(node.get("items"), Mapping):
        node = node["items"]
    out: dict[str, str] = {}
    for key in ("oneOf", "anyOf"):
        for branch in node.get(key) or []:
            if isinstance(branch, Mapping) and "const" in branch and "title" in branch:
                out[json.dumps(branch["const"])] = str(branch["title"])
    return out


def _shown(value: Any, titles: Mapping[str, str]) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list):
        return ", ".join(_shown(v, titles) for v in value) or "(none)"
    titled = titles.get(json.dumps(value))
    if titled is not None:
        return titled
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def answer_text(item: Item, values: Mapping[str, Any], *, more_url: str) -> str:
    """An answer's values one per line under their fields' labels, long ones cut."""
    if not values:
        return "_(no values)_"
    labels, lines, used = _labels(item), [], 0
    for name, value in values.items():
        shown = _shown(value, _titles(item, name))
        cut = len(shown) > _VALUE_CUT
        line = f"*{esc(labels.get(name, name))}*: {esc(clip(shown, _VALUE_CUT + 1))}"
        if cut:
            line += f" {link(more_url, 'see all')}"
        if used + len(line) > _ANSWER_BUDGET:
            lines.append(f"… {link(more_url, 'the whole answer on the web page')}")
            break
        lines.append(line)
        used += len(line) + 1
    return "\n".join(lines)


def _url_blocks(url: str) -> list[dict[str, Any]]:
    link = read_link(url)
    if isinstance(link, str):
        # Read as a browser reads it, this link is refused: it is never said to lead
        # anywhere, and it gets no button.
        return [
            section(
                f"🔗 The question asks you to open a link that is not offered here: {esc(link)}."
                f"\n`{esc(clip(url, 200))}`"
            )
        ]
    shown = _safe_url(link)
    where = (
        f"<{shown}|{esc(clip(_encoded(link), 500))}>"
        if len(shown) <= _LINK_MAX
        else "The link is too long to show here: open the item on the web page to see it."
    )
    host = "" if link.host == link.domain else f" (host `{esc(link.host)}`)"
    return [
        section(f"🔗 Opens *{esc(link.domain)}*{host}\n{where}"),
        context(
            f"*Open link* takes you to *{esc(link.domain)}* in your browser at once (Slack does "
            "not ask first): open it only if you expected this. Then press *Done* when you "
            "have finished there, or *Decline*."
        ),
    ]


def _question(item: Item, title_cut: int) -> str:
    """The title in bold, then the question's text (unless the title already says it all)."""
    body = item.body.strip()
    said = f"*{esc(clip(item.title, title_cut))}*"
    return said if not body or body in item.title else f"{said}\n{esc(clip(body, _BODY_CUT))}"


def question_blocks(item: Item, *, base_url: str) -> list[dict[str, Any]]:
    """The card of a question: the question, what it asks for, and its buttons or, once
    decided, who answered what."""
    url = item_url(base_url, item)
    heading = "question" if not item.decided else _HEADING.get(item.status, str(item.status))
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": plain(f"{item.skill}: {heading}")},
        section(_question(item, 3000)),
    ]
    target = question_url(item)
    if target is not None:
        blocks += _url_blocks(target)
    elif not item.decided:
        labels = [f.label for f in form_fields(item.schema or {}, {})]
        if labels:
            blocks.append(context("📝 Asks for: " + ", ".join(f"*{esc(x)}*" for x in labels)))
        if item.args:
            proposed = answer_text(item, item.args, more_url=url)
            blocks.append(section(f"*Proposed answer*\n{proposed}"))
    if item.decided:
        answered = item.status in {ItemStatus.APPROVED, ItemStatus.EDITED}
        values = item.final_args if item.final_args is not None else item.args
        if answered and target is None:
            blocks.append(section(f"*Answer*\n{answer_text(item, values or {}, more_url=url)}"))
        blocks.append(section(question_decided(item)))
    else:
        blocks.append(question_buttons(item))
    blocks.append(context(link(url, "Open on the web page")))
    return blocks


_HEADING = {
    ItemStatus.APPROVED: "answered",
    ItemStatus.EDITED: "answered",
    ItemStatus.REJECTED: "declined",
    ItemStatus.EXPIRED: "expired",
    ItemStatus.CANCELLED: "closed",
}


def question_buttons(item: Item) -> dict[str, Any]:
    """Answer… and Decline; in URL mode Open link, Done and Decline."""
    decline: dict[str, Any] = {
        "type": "button",
        "action_id": DECLINE,
        "text": plain("Decline"),
        "style": "danger",
        "value": item.id,
    }
    target = question_url(item)
    elements: list[dict[str, Any]] = []
    if target is None:
        elements.append(_button(ANSWER, "Answer…", item.id, primary=True))
    else:
        link = read_link(target)
        if not isinstance(link, str) and len(_encoded(link)) <= _BUTTON_URL_MAX:
            elements.append({**_button(OPEN_LINK, "Open link", item.id), "url": _encoded(link)})
        elements.append(_button(DONE, "Done", item.id, primary=True))
    elements.append(decline)
    return {"type": "actions", "block_id": f"decide:{item.id}", "elements": elements}


def _button(action_id: str, text: str, value: str, *, primary: bool = False) -> dict[str, Any]:
    button: dict[str, Any] = {
        "type": "button",
        "action_id": action_id,
        "text": plain(text),
        "value": value,
    }
    if primary:
        button["style"] = "primary"
    return button


def question_decided(item: Item) -> str:
    """One line saying how a question ended: who answered or declined, through which
    channel, when (and why, for a decline)."""
    by, via, at = (
        who_text(item.decided_by, item.decided_via),
        item.decided_via,
        when(item.decided_at),
    )
    match item.status:
        case ItemStatus.APPROVED | ItemStatus.EDITED:
            verb = "Done" if question_url(item) is not None else "Answered"
            return f"✅ {verb} by {by} via {esc(via or '?')} at {at}"
        case ItemStatus.REJECTED:
            line = f"❌ Declined by {by} via {esc(via or '?')} at {at}"
            return line + (f": {esc(item.reason)}" if item.reason else "")
        case ItemStatus.EXPIRED:
            line = f"⌛ Expired at {at}: nobody answered in time"
            return line + (f" ({esc(item.reason)})" if item.reason else "")
        case ItemStatus.CANCELLED:
            return f"🚫 Closed at {at}: the question was withdrawn before anyone answered"
        case _:
            return f"{esc(str(item.status))} at {at}"


def _free_text(fields: list[Field]) -> list[Field]:
    """A question with one text field is answered in words: give it room."""
    if len(fields) == 1 and fields[0].kind == "text" and not fields[0].format:
        return [replace(fields[0], kind="textarea")]
    return fields


def answer_modal(item: Item, *, ref: ModalRef, base_url: str) -> dict[str, Any]:
    """The answer form of a question: its text, then one input per field of its schema."""
    fields = _free_text(form_fields(item.schema or {}, item.args or {}))
    url = item_url(base_url, item)
    intro = [
        section(_question(item, 200)),
        context(f"Required fields are marked. {link(url, 'Open on the web page')}"),
    ]
    return form_modal(item, ref=ref, url=url, fields=fields, intro=intro, words=_ANSWER_WORDS)


def decline_modal(item: Item, *, ref: ModalRef) -> dict[str, Any]:
    """Decline a question, with an optional reason the asker reads."""
    return reason_modal(item, ref=ref, verb="Decline", label="Why not? The asker reads this")
