"""One approval card as a person sees it on Slack, in a mail and on the web page, side by side:
the picture in the README (docs/images/card.png), made from the project's own renders.

- Slack: the blocks `pizzabot.channels.slack.blocks.message` builds for the item, drawn as simple HTML
  in the style of Slack's Block Kit (header, sections, fields, context, buttons). A faithful
  approximation, labelled as such: Slack itself draws the real thing.
- Email: the HTML part of the mail `pizzabot.channels.email.compose.item_mail` composes for an
  approver, under the headers a mail client shows.
- Web: the item page of the web inbox, served by the real router over a real socket.

Headless Chromium renders all three and the strip that puts them side by side. The test
writes test-output/card.png and checks that each panel shows the card; the committed picture
is refreshed by hand with

    .venv/bin/python -m tests.test_card_picture docs/images/card.png

The data is fixed (ids, times, keys), so the same code makes the same picture.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import html
import re
import socket
import struct
import sys
import tempfile
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from playwright.async_api import Browser, async_playwright

from pizzabot.agent.model import Item, Risk, Run
from pizzabot.agent.skills import Approvers, Skill
from pizzabot.channels.email.compose import MailIdentity, Thread, item_mail, subject_for
from pizzabot.channels.email.keys import MailKey
from pizzabot.channels.email.links import make_links
from pizzabot.channels.slack.blocks import message
from tests.peers.required import CHROMIUM
from tests.peers.web import T0, WebApp

ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--font-render-hinting=none",
]
BASE_URL = "https://pizzabot.example.com"
APPROVER = "bob@example.com"
#: The widths each panel is drawn at: a Slack message pane, a mail reading pane, and the web
#: page just wide enough for its two columns (context on the left, the decision on the right).
SLACK_WIDTH, MAIL_WIDTH, WEB_WIDTH = 470, 560, 800
MAX_BYTES = 300_000

SKILL = Skill(
    name="sales-assistant",
    description="answers customers and sends quotes",
    instructions="Help the sales team.",
    model="openai/none",
    approvers=Approvers(slack=["U123"], email=[APPROVER]),
)
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "to": {"type": "string", "format": "email", "description": "Recipient"},
        "subject": {"type": "string", "maxLength": 120},
        "body": {"type": "string"},
        "priority": {"type": "string", "enum": ["low", "normal", "high"]},
        "copies": {"type": "integer", "minimum": 1, "maximum": 10},
    },
    "required": ["to", "subject", "body"],
}
ARGS_PROPOSED = {
    "to": "ann@example.com",
    "subject": "Your quote",
    "body": "Hello Ann,\nhere is the quote we talked about.\nBest, Bob",
    "priority": "normal",
    "copies": 1,
}


@dataclass(frozen=True)
class Panels:
    """What each panel shows as text, for the test to check, and the picture itself."""

    slack: str
    email: str
    web: str
    png: bytes


# --- Slack: Block Kit as HTML -------------------------------------------------------------

_TOKEN = re.compile(r"<([^<>\n]+)>")
_CODE = re.compile(r"`([^`\n]+)`")
_STYLES = [
    (re.compile(r"(?<![\w*])\*(?=\S)([^*\n]+?)(?<=\S)\*(?![\w*])"), "b"),
    (re.compile(r"(?<![\w_])_(?=\S)([^_\n]+?)(?<=\S)_(?![\w_])"), "i"),
    (re.compile(r"(?<![\w~])~(?=\S)([^~\n]+?)(?<=\S)~(?![\w~])"), "s"),
]


def _svg(body: str) -> str:
    return f'<svg class="sk-emoji" viewBox="0 0 16 16" aria-hidden="true">{body}</svg>'


#: Slack draws emoji as pictures; these are the ones the project's cards use, drawn small, so
#: the picture does not depend on an emoji font being installed.
_EMOJI = {
    "🔧": _svg(
        '<g transform="rotate(45 8 8)"><rect x="6.9" y="5" width="2.2" height="10.5" rx="1.1"'
        ' fill="#7d8590"/><circle cx="8" cy="4.2" r="3.7" fill="#7d8590"/>'
        '<rect x="6.9" y="-0.5" width="2.2" height="4.6" fill="#fff"/></g>'
    ),
    "⚠": _svg(
        '<path d="M8 1.2 15.4 14.6H.6Z" fill="#f6c344" stroke="#c9961a" stroke-width=".8"/>'
        '<rect x="7.2" y="5.4" width="1.6" height="5" rx=".8" fill="#333"/>'
        '<circle cx="8" cy="12.3" r=".95" fill="#333"/>'
    ),
    "✅": _svg(
        '<rect x="1" y="1" width="14" height="14" rx="3" fill="#3aa757"/>'
        '<path d="m4.2 8.3 2.6 2.6 5-5.4" fill="none" stroke="#fff" stroke-width="2"/>'
    ),
    "✏": _svg(
        '<g transform="rotate(45 8 8)"><rect x="6.4" y="1" width="3.2" height="10" fill="#f2b01e"/>'
        '<path d="M6.4 11h3.2L8 14.6Z" fill="#e8c9a0"/><rect x="6.4" y=".2" width="3.2" '
        'height="1.6" fill="#e57373"/></g>'
    ),
    "❌": _svg('<path d="m3 3 10 10M13 3 3 13" stroke="#dd2e44" stroke-width="3"/>'),
    "🚫": _svg(
        '<circle cx="8" cy="8" r="6.2" fill="none" stroke="#dd2e44" stroke-width="2.2"/>'
        '<path d="m3.7 3.7 8.6 8.6" stroke="#dd2e44" stroke-width="2.2"/>'
    ),
}
_EMOJI_CHAR = re.compile("(" + "|".join(map(re.escape, _EMOJI)) + ")\ufe0f?")


def _slot(n: int) -> str:
    return f"\ue000{n}\ue001"


def mrkdwn_html(text: str) -> str:
    """Slack's mrkdwn as HTML: links and mentions, `code`, *bold*, _italic_, ~strike~.

    Slack text arrives with its own escapes (&amp; &lt; &gt;); every piece is unescaped and
    escaped again for HTML, so nothing in it becomes markup here either."""
    kept: list[str] = []

    def keep(fragment: str) -> str:
        kept.append(fragment)
        return _slot(len(kept) - 1)

    def token(m: re.Match[str]) -> str:
        inner = m.group(1)
        target, _, label = inner.partition("|")
        if target.startswith(("@", "#", "!")):
            shown = label or target.lstrip("!@#")
            return keep(f'<span class="sk-mention">@{html.escape(html.unescape(shown))}</span>')
        shown = label or target
        return keep(
            f'<a href="{html.escape(html.unescape(target))}">'
            f"{html.escape(html.unescape(shown))}</a>"
        )

    text = _TOKEN.sub(token, text)
    text = _CODE.sub(lambda m: keep(f"<code>{html.escape(html.unescape(m[1]))}</code>"), text)
    out = html.escape(html.unescape(text), quote=False)
    for pattern, tag in _STYLES:
        out = pattern.sub(rf"<{tag}>\1</{tag}>", out)
    out = _EMOJI_CHAR.sub(lambda m: _EMOJI[m[1]], out.replace("\n", "<br>"))
    for n, fragment in enumerate(kept):
        out = out.replace(_slot(n), fragment)
    return out


def _text(obj: Mapping[str, Any] | None) -> str:
    if not obj:
        return ""
    if obj.get("type") == "mrkdwn":
        return mrkdwn_html(str(obj.get("text", "")))
    return html.escape(str(obj.get("text", ""))).replace("\n", "<br>")


def _element(el: Mapping[str, Any]) -> str:
    match el.get("type"):
        case "button":
            style = el.get("style")
            cls = f"sk-button {style}" if style in ("primary", "danger") else "sk-button"
            return f'<span class="{cls}">{_text(el.get("text"))}</span>'
        case "image":
            return f'<span class="sk-image">{html.escape(str(el.get("alt_text", "")))}</span>'
        case "static_select" | "users_select" | "conversations_select" | "datepicker":
            return f'<span class="sk-select">{_text(el.get("placeholder")) or "Select"} ▾</span>'
        case "mrkdwn" | "plain_text":
            return f"<span>{_text(el)}</span>"
        case other:
            return f'<span class="sk-unknown">[{html.escape(str(other))}]</span>'


def block_kit_html(blocks: Sequence[Mapping[str, Any]]) -> str:
    """The blocks of a message as HTML, one element per block."""
    out: list[str] = []
    for b in blocks:
        match b.get("type"):
            case "header":
                out.append(f'<div class="sk-header">{_text(b.get("text"))}</div>')
            case "section":
                inner = f'<div class="sk-text">{_text(b.get("text"))}</div>' if "text" in b else ""
                if b.get("fields"):
                    fields = "".join(f"<div>{_text(f)}</div>" for f in b["fields"])
                    inner += f'<div class="sk-fields">{fields}</div>'
                if b.get("accessory"):
                    inner += f'<div class="sk-accessory">{_element(b["accessory"])}</div>'
                out.append(f'<div class="sk-section">{inner}</div>')
            case "context":
                parts = "".join(_element(e) for e in b.get("elements", []))
                out.append(f'<div class="sk-context">{parts}</div>')
            case "actions":
                parts = "".join(_element(e) for e in b.get("elements", []))
                out.append(f'<div class="sk-actions">{parts}</div>')
            case "divider":
                out.append('<hr class="sk-divider">')
            case other:
                out.append(f'<div class="sk-unknown">[{html.escape(str(other))} block]</div>')
    return "\n".join(out)


_SLACK_CSS = """
body { margin: 0; background: #fff; color: #1d1c1d;
  font: 15px/1.46668 Lato, "Helvetica Neue", "DejaVu Sans", sans-serif; }
.sk-channel { padding: 10px 18px; border-bottom: 1px solid #e8e8e8; font-weight: 900; font-size: 17px; }
.sk-channel span { color: #616061; font-weight: 400; }
.sk-msg { display: flex; gap: 8px; padding: 14px 18px 18px; }
.sk-avatar { flex: none; width: 36px; height: 36px; border-radius: 6px; background: #f59e0b;
  color: #7c2d12; font-weight: 900; display: grid; place-items: center; font-size: 14px; }
.sk-body { min-width: 0; flex: 1; }
.sk-who { line-height: 1.2; margin-bottom: 2px; }
.sk-who b { font-weight: 900; }
.sk-app { font-size: 10px; font-weight: 700; color: #616061; background: #e8e8e8;
  padding: 1px 3px; border-radius: 2px; vertical-align: 1px; }
.sk-time { color: #616061; font-size: 12px; }
.sk-header { font-size: 18px; font-weight: 900; margin: 6px 0 4px; }
.sk-section { margin: 6px 0; overflow-wrap: anywhere; }
.sk-fields { display: grid; grid-template-columns: 1fr 1fr; gap: 8px 16px; margin-top: 4px; }
.sk-context { color: #616061; font-size: 13px; margin: 4px 0; display: flex; flex-wrap: wrap; gap: 4px; }
.sk-actions { display: flex; flex-wrap: wrap; gap: 8px; margin: 10px 0 6px; }
.sk-button { display: inline-block; padding: 0 12px; height: 28px; line-height: 26px; font-size: 13px;
  font-weight: 700; border: 1px solid #bbbabb; border-radius: 4px; background: #fff; color: #1d1c1d; }
.sk-button.primary { background: #007a5a; border-color: #007a5a; color: #fff; }
.sk-button.danger { background: #e01e5a; border-color: #e01e5a; color: #fff; }
.sk-select { display: inline-block; padding: 0 10px; height: 28px; line-height: 26px;
  border: 1px solid #bbbabb; border-radius: 4px; font-size: 13px; }
code { font: 12px/1.5 Monaco, Menlo, "DejaVu Sans Mono", monospace; color: #e01e5a;
  background: #f8f8f8; border: 1px solid #e8e8e8; border-radius: 3px; padding: 1px 3px; }
a { color: #1264a3; text-decoration: none; }
.sk-mention { color: #1264a3; background: #e8f5fa; border-radius: 3px; padding: 0 2px; }
.sk-emoji { width: 1.1em; height: 1.1em; vertical-align: -0.2em; margin-right: 2px; }
.sk-divider { border: 0; border-top: 1px solid #e8e8e8; margin: 10px 0; }
"""


def slack_page(item: Item) -> str:
    """The item's Slack message as Slack would show it in a channel."""
    msg = message(item, base_url=BASE_URL)
    when = item.created_at.strftime("%-I:%M %p")
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><style>{_SLACK_CSS}</style></head>"
        "<body><div class='sk-channel'># approvals <span>· Pizza Bot posts here</span></div>"
        "<div class='sk-msg'><div class='sk-avatar'>PB</div><div class='sk-body'>"
        "<div class='sk-who'><b>Pizza Bot</b> <span class='sk-app'>APP</span> "
        f"<span class='sk-time'>{html.escape(when)}</span></div>"
        f"{block_kit_html(msg.blocks)}</div></div></body></html>"
    )


# --- Email: the composed mail in a reading pane ----------------------------------------------

_MAIL_CSS = """
body { margin: 0; background: #fff; font: 14px/1.45 system-ui, "DejaVu Sans", sans-serif; color: #222; }
.m-head { padding: 14px 18px 10px; border-bottom: 1px solid #e5e5e5; background: #fafafa; }
.m-subject { font-size: 18px; font-weight: 600; margin-bottom: 6px; }
.m-line { color: #555; font-size: 13px; }
.m-line b { color: #222; }
.m-body { padding: 4px 18px 12px; overflow-wrap: anywhere; }
/* A reading pane this narrow wraps long preformatted lines rather than scroll sideways. */
.m-body pre { white-space: pre-wrap; }
"""


def mail_page(item: Item, run: Run) -> str:
    """The HTML part of the approver's mail, under From, To, Subject and Date."""
    key = MailKey(b"a fixed key, so the picture is the same every time")
    token = key.reply_token(item.id, APPROVER)
    identity = MailIdentity(address="pizzabot@example.com")
    mail = item_mail(
        item,
        run,
        identity=identity,
        to=APPROVER,
        message_id=identity.item_message_id("delivery1", token),
        thread=Thread(subject_for(item.skill, run.input)),
        can_decide=True,
        token=token,
        links=make_links(key, item, address=APPROVER, base_url=BASE_URL, ttl=86400, now=T0),
        now=T0,
    )
    part = mail.get_body(preferencelist=("html",))
    assert part is not None, "the item mail has no HTML part"
    document = str(part.get_content())
    found = re.search(r"<body([^>]*)>(.*)</body>", document, re.S)
    assert found, "the HTML part has no body"
    attrs, body = found.groups()
    e = html.escape
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><style>{_MAIL_CSS}</style></head>"
        "<body><div class='m-head'>"
        f"<div class='m-subject'>{e(str(mail['Subject']))}</div>"
        f"<div class='m-line'><b>{e(str(mail['From']))}</b></div>"
        f"<div class='m-line'>to {e(str(mail['To']))} · {e(str(mail['Date']))}</div>"
        f"</div><div class='m-body'><div{attrs}>{body}</div></div></body></html>"
    )


# --- the picture -----------------------------------------------------------------------------

_STRIP_CSS = """
body { margin: 0; background: #eceae4; font: 15px/1.3 system-ui, "DejaVu Sans", sans-serif; }
.strip { display: flex; align-items: flex-start; gap: 22px; padding: 20px 22px 24px; width: max-content; }
figure { margin: 0; }
figcaption { font-weight: 700; font-size: 17px; color: #333; margin: 0 0 8px 2px; }
figcaption span { font-weight: 400; font-size: 13px; color: #666; }
img { display: block; border-radius: 8px; box-shadow: 0 1px 3px rgb(0 0 0 / 0.18); }
"""


def strip_page(panels: Sequence[tuple[str, str, bytes]]) -> str:
    figures = "".join(
        f"<figure><figcaption>{html.escape(name)} <span>{html.escape(note)}</span></figcaption>"
        f"<img src='data:image/png;base64,{base64.b64encode(png).decode()}' alt=''></figure>"
        for name, note, png in panels
    )
    return (
        f"<!doctype html><html><head><style>{_STRIP_CSS}</style></head>"
        f"<body><div class='strip'>{figures}</div></body></html>"
    )


def png_size(data: bytes) -> tuple[int, int]:
    """Width and height from a PNG's header."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


@contextlib.asynccontextmanager
async def serving(web: WebApp) -> AsyncIterator[str]:
    """The web inbox on a loopback port. The socket listens before the server starts, so a
    request made at once waits in the backlog instead of failing."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    server = uvicorn.Server(uvicorn.Config(web.app, log_level="warning", lifespan="off"))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        await task
        sock.close()


async def _shoot(browser: Browser, width: int, *, url: str = "", content: str = "") -> bytes:
    context = await browser.new_context(viewport={"width": width, "height": 600})
    try:
        page = await context.new_page()
        if url:
            await page.goto(url)
        else:
            await page.set_content(content)
        return await page.screenshot(full_page=True)
    finally:
        await context.close()


async def _shoot_strip(browser: Browser, content: str) -> bytes:
    context = await browser.new_context(viewport={"width": 2400, "height": 800})
    try:
        page = await context.new_page()
        await page.set_content(content)
        return await page.locator(".strip").screenshot()
    finally:
        await context.close()


async def _text_of(browser: Browser, *, url: str = "", content: str = "") -> str:
    context = await browser.new_context()
    try:
        page = await context.new_page()
        if url:
            await page.goto(url)
        else:
            await page.set_content(content)
        return await page.inner_text("body")
    finally:
        await context.close()


async def make_picture(workdir: Path) -> Panels:
    """Render one pending card on the three channels, and a picture of them side by side."""
    async with WebApp(workdir, skill=SKILL) as web:
        item = await web.action_item(
            schema=SCHEMA,
            args=dict(ARGS_PROPOSED),
            body="Ann asked for the quote on Monday, so I will mail it to her now.",
            risk=Risk(impact="high", reversible=False, scope="external"),
            run_input="Send Ann the quote she asked for",
        )
        run = await web.store.get_run(item.run_id)
        slack, mail = slack_page(item), mail_page(item, run)
        async with serving(web) as url, async_playwright() as p:
            browser = await p.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
            try:
                login = f"{url}/login?token={web.token}&next=/items/{item.id}"
                web_png = await _shoot(browser, WEB_WIDTH, url=login)
                panels = [
                    (
                        "Slack",
                        "Block Kit, drawn as HTML",
                        await _shoot(browser, SLACK_WIDTH, content=slack),
                    ),
                    ("Email", "the HTML part", await _shoot(browser, MAIL_WIDTH, content=mail)),
                    ("Web", "the item page", web_png),
                ]
                picture = await _shoot_strip(browser, strip_page(panels))
                texts = Panels(
                    slack=await _text_of(browser, content=slack),
                    email=await _text_of(browser, content=mail),
                    web=await _text_of(browser, url=login),
                    png=picture,
                )
            finally:
                await browser.close()
    return texts


@pytest.mark.browser
def test_one_card_on_slack_email_and_the_web_side_by_side(output_dir: Path, tmp_path: Path) -> None:
    panels = asyncio.run(make_picture(tmp_path))
    (output_dir / "card.png").write_bytes(panels.png)
    for shown in (panels.slack, panels.email, panels.web):
        assert "send_email" in shown and "ann@example.com" in shown and "Your quote" in shown
    assert "sales-assistant: approval needed" in panels.slack
    assert all(b in panels.slack for b in ("Approve", "Edit", "Reject"))
    assert "Risk:" in panels.slack and "not reversible" in panels.slack
    assert "Proposed arguments" in panels.email and "reply" in panels.email.lower()
    assert "Approve" in panels.email and "Reject" in panels.email
    assert all(b in panels.web for b in ("Approve", "Edit", "Reject", "cannot be undone"))
    width, height = png_size(panels.png)
    assert width > height and width <= 2000, (width, height)  # three panels in a row
    assert len(panels.png) < MAX_BYTES, f"{len(panels.png)} bytes: too big for the README"


def test_mrkdwn_becomes_html_and_escaped_text_stays_text() -> None:
    got = mrkdwn_html("*to*: a &lt;b&gt; _x_ `c&amp;d` <https://h/i?a=1&amp;b=2|see all>\n⚠️ ok")
    assert got == (
        '<b>to</b>: a &lt;b&gt; <i>x</i> <code>c&amp;d</code> <a href="https://h/i?a=1&amp;b=2">'
        f"see all</a><br>{_EMOJI['⚠']} ok"
    )


def main(argv: Sequence[str]) -> int:
    if len(argv) != 2:
        print(f"usage: python -m tests.test_card_picture OUT.png\n\n{__doc__}", file=sys.stderr)
        return 2
    out = Path(argv[1])
    with tempfile.TemporaryDirectory() as tmp:
        panels = asyncio.run(make_picture(Path(tmp)))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(panels.png)
    width, height = png_size(panels.png)
    print(f"{out}: {width}x{height}, {len(panels.png):,} bytes")
    return 0 if len(panels.png) < MAX_BYTES else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
