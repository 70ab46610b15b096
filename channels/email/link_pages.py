"""The small pages behind a mail's links (a decision's confirm page, an Undo's): plain HTML
that never caches, is never indexed, and sends no referrer."""

from __future__ import annotations

import html
from dataclasses import dataclass

from fastapi.responses import HTMLResponse

__all__ = ["Page", "message_page", "page_response"]


@dataclass(frozen=True)
class Page:
    status: int
    title: str
    body: str  # HTML


def page_response(page: Page) -> HTMLResponse:
    """`page` as the answer to a link's GET or POST."""
    e = html.escape
    doc = (
        "<!doctype html><html><head><meta charset='utf-8'>"
        "<meta name='robots' content='noindex'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>{e(page.title)}</title>"
        "<style>body{font-family:system-ui,sans-serif;max-width:40em;margin:2em auto;"
        "padding:0 1em;color:#222}label{display:block;margin:.8em 0 .2em;font-weight:600}"
        "input[type=text],input[type=number],textarea,select{width:100%;padding:.4em;"
        "box-sizing:border-box}button{margin-top:1em;padding:.6em 1.4em;font-size:1em}"
        ".err{color:#b00020}.hint{color:#666;font-size:.9em}pre{white-space:pre-wrap}</style>"
        f"</head><body><h1>{e(page.title)}</h1>{page.body}</body></html>"
    )
    return HTMLResponse(
        doc,
        status_code=page.status,
        headers={
            "Cache-Control": "no-store",
            "Referrer-Policy": "no-referrer",
            "X-Robots-Tag": "noindex",
        },
    )


def message_page(status: int, title: str, text: str) -> Page:
    """A page that only says something (the outcome, or why a link is not usable)."""
    return Page(status, title, f"<p>{html.escape(text).replace(chr(10), '<br>')}</p>")
