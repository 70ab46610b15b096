"""Telegram messages for cards and prompts: HTML text (Telegram's `parse_mode: HTML`) with an
inline keyboard of callback buttons (and a link button to the card's page where the approval
needs a passkey).

Telegram's limits shape this: a message holds 4,096 characters after its markup is read, a
button's `callback_data` 64 bytes, and a force-reply's placeholder 64 characters. Every part
of a card is cut to a share of the message, so a card fits whatever a model wrote; a form
too long for a message is left to the item's web page.

A prompt (an edit's or a reject's) ends with a line naming the item and the digest of the card
it was asked from; the reply to it carries the prompt back (Telegram sends the message a
reply answers), and only a prompt the bot itself sent is read so.
"""

from __future__ import annotations

import html
import ipaddress
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from pizzabot.agent.argforms import Field
from pizzabot.agent.card_digest import card_digest
from pizzabot.agent.model import Item, RunStatus
from pizzabot.channels.chat.card import Button, Card, card_of, card_value, clip, item_url
from pizzabot.channels.chat.forms import errors_text, prompt_text

__all__ = [
    "CALLBACK_MAX",
    "TEXT_MAX",
    "Message",
    "PromptRef",
    "callback_of",
    "card_message",
    "edit_prompt",
    "public_url",
    "read_prompt",
    "reject_prompt",
    "visible_length",
]

#: Characters of a message's text after its markup is read (UTF-16 code units).
TEXT_MAX = 4096
#: Bytes of a button's callback_data.
CALLBACK_MAX = 64
_PLACEHOLDER_MAX = 64

_VERB_CODE = {"approve": "a", "edit": "e", "reject": "r"}
_CODE_VERB = {v: k for k, v in _VERB_CODE.items()}
_ARGS_BUDGET = 1200
_VALUE_CUT = 200
_PROMPT_FORM_MAX = 3000
_PROMPT_REF = re.compile(r"^ref: (edit|reject) ([A-Za-z0-9_-]{1,40}) ([0-9a-f]{32})$")


@dataclass(frozen=True)
class Message:
    """A message's HTML text and its reply markup (None: no buttons)."""

    text: str
    markup: dict[str, Any] | None


def _esc(text: str) -> str:
    return html.escape(text, quote=False)


def _link(url: str, label: str) -> str:
    return f'<a href="{html.escape(url, quote=True)}">{_esc(label)}</a>'


def visible_length(text: str) -> int:
    """The length Telegram counts of an HTML text: its characters once the tags are gone and
    the entities read, in UTF-16 code units."""
    shown = html.unescape(re.sub(r"<[^>]*>", "", text))
    return len(shown.encode("utf-16-le")) // 2


def callback_of(verb: str, item: Item) -> str | None:
    """A button's callback_data: the verb's letter, the item and the card's digest; None
    when it would not fit Telegram's 64 bytes (the card links the web page instead)."""
    data = f"{_VERB_CODE[verb]}:{card_value(item)}"
    return data if len(data.encode()) <= CALLBACK_MAX else None


def read_callback(data: str) -> tuple[str, str, str | None] | None:
    """(verb, item id, digest) from a button's callback_data; None for anything else."""
    code, _, value = data.partition(":")
    verb = _CODE_VERB.get(code)
    if verb is None or not value:
        return None
    item_id, _, seen = value.partition(":")
    return verb, item_id, seen or None


def _keyboard(item: Item, buttons: Sequence[Button]) -> dict[str, Any] | None:
    row: list[dict[str, str]] = []
    for button in buttons:
        if button.url is not None and public_url(button.url):
            # Approved on the web page, with a passkey. Telegram takes no link to a loopback
            # or a bare address: there the button stays one whose click is refused, saying why.
            row.append({"text": button.label, "url": button.url})
            continue
        data = callback_of(button.verb, item)
        if data is not None:
            row.append({"text": button.label, "callback_data": data})
    return {"inline_keyboard": [row]} if row else None


def public_url(url: str) -> bool:
    """Whether Telegram takes `url` for a button: http(s), to a host name that is not this
    computer's (it refuses "localhost" and bare IP addresses as a wrong HTTP URL)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.scheme not in ("http", "https") or not host or host == "localhost":
        return False
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return "." in host
    return False


def _args_lines(card: Card) -> list[str]:
    lines: list[str] = []
    used = 0
    for key, value in card.args:
        line = f"<b>{_esc(clip(key, 60))}</b>: {_esc(clip(value, _VALUE_CUT))}"
        cost = len(clip(key, 60)) + len(clip(value, _VALUE_CUT)) + 3
        if used + cost > _ARGS_BUDGET:
            lines.append(_link(card.url, "… more arguments on the web page"))
            break
        lines.append(line)
        used += cost
    return lines or ["<i>(no arguments)</i>"]


def card_message(item: Item, *, base_url: str, outcome: RunStatus | None = None) -> Message:
    """The message for `item` as it is now: its card with buttons while it waits. The body
    gives way (cut shorter) until the whole fits Telegram's limit."""
    card = card_of(item, base_url=base_url, outcome=outcome)
    body_limit = 3000 if not card.args_label else 1000
    while True:
        text = _card_text(card, body_limit)
        if visible_length(text) <= TEXT_MAX or body_limit <= 0:
            return Message(text, _keyboard(item, card.buttons))
        body_limit = body_limit // 2 if body_limit > 100 else 0


def _card_text(card: Card, body_limit: int) -> str:
    parts = [f"<b>{_esc(clip(card.heading, 200))}</b>"]
    if card.title:
        parts.append(f"<b>{_esc(clip(card.title, 300))}</b>")
    if card.body and body_limit > 0:
        parts.append(_esc(clip(card.body, body_limit)))
    parts.extend(_esc(clip(fact, 200)) for fact in card.facts[:6])
    if card.args_label:
        parts.append(f"<b>{_esc(card.args_label)}</b>")
        parts.extend(_args_lines(card))
    if card.outcome:
        parts.append(_esc(clip(card.outcome, 500)))
    parts.append(_link(card.url, card.link_label))
    return "\n".join(parts)


@dataclass(frozen=True)
class PromptRef:
    """What a reply to a prompt is for: an edit or a reject of `item_id`, from the card whose
    digest is `seen`."""

    verb: str
    item_id: str
    seen: str


def _ref_line(verb: str, item: Item) -> str:
    return f"<code>ref: {verb} {_esc(item.id)} {card_digest(item)}</code>"


def read_prompt(text: str) -> PromptRef | None:
    """The prompt a reply answers, from the prompt's text as Telegram sends it back."""
    lines = text.strip().splitlines()
    found = _PROMPT_REF.match(lines[-1].strip()) if lines else None
    if found is None:
        return None
    return PromptRef(found.group(1), found.group(2), found.group(3))


def _mention(user: Mapping[str, Any]) -> str:
    name = str(user.get("first_name") or "you")
    return f'<a href="tg://user?id={int(user.get("id") or 0)}">{_esc(clip(name, 60))}</a>'


def _force_reply(placeholder: str) -> dict[str, Any]:
    return {
        "force_reply": True,
        "selective": True,
        "input_field_placeholder": clip(placeholder, _PLACEHOLDER_MAX),
    }


def edit_prompt(
    item: Item,
    fields: Sequence[Field],
    *,
    user: Mapping[str, Any],
    base_url: str,
    errors: Mapping[str, str] | None = None,
) -> Message:
    """Ask `user` for the fields they change, as `name: value` lines in a reply; with
    `errors`, what was wrong with their last reply first. A form too long for a message
    links the web page instead, with no reply asked for."""
    url = item_url(base_url, item)
    form = prompt_text(fields, limit=_PROMPT_FORM_MAX)
    what = "Answer" if item.kind.value == "question" else "Edit"
    parts: list[str] = []
    if errors:
        parts += ["Not applied; the item still waits:", _esc(clip(errors_text(errors), 600)), ""]
    if form is None or not fields:
        why = "This form is too long for a message." if fields else "Nothing here can be typed."
        parts.append(f"{_esc(why)} {_link(url, 'Edit it on the web page')}.")
        return Message("\n".join(parts), None)
    tool = item.tool_place[0] or item.title
    if len(fields) == 1:
        ask = f"reply to this message with the new {fields[0].name}"
    else:
        ask = "reply to this message with the lines you change, as name: value"
    parts += [
        f"✏️ {what} <b>{_esc(clip(tool, 100))}</b>, {_mention(user)}: {_esc(ask)}.",
        f"<pre>{_esc(form)}</pre>",
        f"The whole form is on the {_link(url, 'web page')}.",
        _ref_line("edit", item),
    ]
    return Message("\n".join(parts), _force_reply(f"{fields[0].name}: …"))


def reject_prompt(item: Item, *, user: Mapping[str, Any]) -> Message:
    """Ask `user` for the reason of a reject (the agent reads it); `-` for none."""
    verb = "Decline" if item.kind.value == "question" else "Reject"
    text = "\n".join(
        [
            f"❌ {verb} <b>{_esc(clip(item.title, 300))}</b>, {_mention(user)}: reply to this "
            "message with the reason the agent reads, or - for none.",
            _ref_line("reject", item),
        ]
    )
    return Message(text, _force_reply("why?"))
