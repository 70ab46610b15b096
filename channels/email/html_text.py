"""An HTML mail body as the text its reader saw, for replies that come without a text part.

Webmail (GMX, web.de, Outlook on the web, Yahoo) often sends HTML only. The reply reader
needs the letters exactly as typed (`f&uuml;r` is "für", never "fur"), one line per line the
person wrote (mail editors write one `<div>` or `<p>` per line and `<div><br></div>` for an
empty one), list items as `- item` (so `- copies: 3` stays an edit line, with no Markdown
escapes), and quotes marked the way plain-text mail marks them: `<blockquote>` lines start
with `>`, and `<hr>` becomes Outlook's plain-text rule line. Links, images and emphasis are
dropped; their text stays. The standard library's tokenizer is enough for that, and it
decodes every named and numeric character reference.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser

__all__ = ["RULE", "html_to_text"]

# What Outlook writes above a quoted header block in plain text; the reply reader knows it.
RULE = "_" * 32

# Content that is never shown: the <head> and what only a program reads.
_HIDDEN = frozenset({"head", "title", "style", "script", "template", "noscript", "xml"})
# Elements that start and end on a line of their own.
_BLOCKS = frozenset(
    {
        "address", "article", "aside", "blockquote", "body", "caption", "center", "dd",
        "details", "dialog", "div", "dl", "dt", "fieldset", "figcaption", "figure", "footer",
        "form", "h1", "h2", "h3", "h4", "h5", "h6", "header", "html", "legend", "li", "main",
        "nav", "ol", "p", "pre", "section", "summary", "table", "tbody", "tfoot", "thead",
        "tr", "ul",
    }
)  # fmt: skip
_CELLS = frozenset({"td", "th"})
# HTML's white space; a no-break space is a letter the person typed and stays.
_SPACE = re.compile(r"[ \t\n\r\f]+")


class _TextWriter(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.lines: list[str] = []
        self._line: list[str] = []
        self._line_depth = 0  # the quote depth where the current line began
        self._hidden: list[str] = []
        self._pre = 0
        self._depth = 0  # <blockquote> nesting
        self._lists: list[int | None] = []  # None for <ul>, the next number for <ol>
        self._cell_open = False

    # -- lines ---------------------------------------------------------------------------

    def _put(self, text: str) -> None:
        if not self._line:
            self._line_depth = self._depth
        self._line.append(text)

    def _break(self) -> None:
        """End the current line, even an empty one (a <br>)."""
        depth = self._line_depth if self._line else self._depth
        text = "".join(self._line).rstrip(" ")
        prefix = "> " * depth
        self.lines.append((prefix + text).rstrip(" ") if depth else text)
        self._line = []

    def _block(self) -> None:
        """Go to the start of a line unless already there (a block's edge)."""
        if "".join(self._line).strip(" "):
            self._break()
        else:
            self._line = []

    # -- tokens --------------------------------------------------------------------------

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "body":
            self._hidden.clear()  # a <head> left open ends where the body begins
        if tag in _HIDDEN:
            self._hidden.append(tag)
            return
        if self._hidden:
            return
        if tag == "br":
            self._break()
        elif tag == "hr":
            self._block()
            self._put(RULE)
            self._break()
        elif tag in _CELLS:
            if self._cell_open and "".join(self._line).strip(" "):
                self._put(" ")
            self._cell_open = True
        elif tag in _BLOCKS:
            self._block()
            if tag == "blockquote":
                self._depth += 1
            elif tag == "pre":
                self._pre += 1
            elif tag == "ul":
                self._lists.append(None)
            elif tag == "ol":
                self._lists.append(1)
            elif tag == "li":
                self._put(self._bullet())
            elif tag == "tr":
                self._cell_open = False

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        # <br/>, <hr/>: a void element written the XHTML way opens nothing.
        if tag in {"br", "hr"}:
            self.handle_starttag(tag, attrs)

    def handle_endtag(self, tag: str) -> None:
        if self._hidden:
            if tag == self._hidden[-1]:
                self._hidden.pop()
            return
        if tag in _BLOCKS:
            self._block()
            if tag == "blockquote" and self._depth:
                self._depth -= 1
            elif tag == "pre" and self._pre:
                self._pre -= 1
            elif tag in {"ul", "ol"} and self._lists:
                self._lists.pop()

    def handle_data(self, data: str) -> None:
        if self._hidden:
            return
        if self._pre:
            first, *rest = data.replace("\r\n", "\n").split("\n")
            self._put(first)
            for line in rest:
                self._break()
                self._put(line)
            return
        text = _SPACE.sub(" ", data)
        if not "".join(self._line).strip(" "):
            text = text.lstrip(" ")  # white space at a line's start is not shown
        elif text.startswith(" ") and self._line[-1].endswith(" "):
            text = text[1:]
        if text:
            self._put(text)

    def _bullet(self) -> str:
        if not self._lists or self._lists[-1] is None:
            return "- "
        number = self._lists[-1]
        self._lists[-1] = number + 1
        return f"{number}. "

    def text(self) -> str:
        self._block()
        return "\n".join(self.lines).strip("\n")


def html_to_text(html: str) -> str:
    """The text of an HTML mail body, line by line as the reader saw it."""
    writer = _TextWriter()
    writer.feed(html)
    writer.close()
    return writer.text()
