"""Previews: what a tool call would do, shown on its card before anyone decides.

A skill names a dry-run tool for a tool (`tools: crm.refund: {policy: ask, preview:
crm.refund_dry_run}`); the built-in `files` server previews its own `write_file` as the
unified diff the write would make (its `preview_write` tool reads the file inside the
granted folder and writes nothing). When a card is made, the dry-run tool is called with the
call's arguments, and its text goes on the card (`Risk.preview`), under the words
"Preview — computed before approval, not what ran".

A preview is the tool server's text: capped (`PREVIEW_CAP`), stripped of control characters,
its server's secrets redacted, and shown as text by every channel. A preview that fails or
does not answer within the tool's `preview_timeout` says so on the card; it never holds the
card back and never decides anything. The real tool is never run for a preview, and the
dry-run tool cannot ask a person anything (a question from it is answered "cancel").

An agent that files a request (`pizzabot.agent.requests`) may send its own preview text: its
tool is on no server of ours, so nothing here can make one. That text is cleaned and capped
the same way and marked on the card as the asking agent's word, not Pizza Bot's
(`requested_preview`).

The card's digest covers the preview (`pizzabot.agent.card_digest`), so an approval counts
only for the preview its approver saw; an edit that keeps the card open (on the way to two
approvals) has its preview made anew for the edited arguments, and an edit of a request's
card drops the agent's preview (it showed the arguments the agent sent).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from pizzabot.agent.model import Item, Preview, Risk
from pizzabot.agent.redaction import Redactor
from pizzabot.agent.skills import Skill
from pizzabot.agent.tools import Tools

__all__ = [
    "FILES_PREVIEWS",
    "FROM_THE_AGENT",
    "PREVIEW_CAP",
    "Previewer",
    "clean_preview",
    "edited_preview",
    "preview_tool",
    "previewer_for",
    "requested_preview",
]

#: Characters of a preview a card keeps (a longer one is cut, saying so).
PREVIEW_CAP = 2000
#: What a request's preview is marked with, after who asked: the agent wrote it, and Pizza
#: Bot shows it as that agent's word (`requested_preview`).
FROM_THE_AGENT = "the agent that asked; not checked by Pizza Bot"
#: The built-in files server's own previews: its tool → the tool that previews it.
FILES_PREVIEWS = {"files.write_file": "files.preview_write"}

# Control characters but tab and new line: a preview is shown as text, never as a terminal.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069]")


def preview_tool(skill: Skill, tool: str) -> str | None:
    """The tool ("server.tool") that previews a call of `tool` under `skill`: the one its
    entry names, else the files server's own for a write to granted folders; None: none."""
    named = skill.rule(tool).preview
    if named is not None:
        return named
    if skill.folders:  # then `files` is the built-in server (bot/ puts it in that name)
        return FILES_PREVIEWS.get(tool)
    return None


def clean_preview(text: str) -> str:
    """`text` as a card shows a preview: control characters out, cut at `PREVIEW_CAP`
    (saying how much was cut)."""
    text = _CONTROL.sub("", text.replace("\r\n", "\n").replace("\r", "\n"))
    if len(text) <= PREVIEW_CAP:
        return text
    return text[:PREVIEW_CAP] + f"\n… [cut: {len(text) - PREVIEW_CAP} more characters]"


def requested_preview(text: str, asked_by: str) -> Preview:
    """The preview an agent sent with its request (`pizzabot.agent.requests`), as its card
    shows it: cleaned and capped as a tool's, and marked as the word of `asked_by` (the
    agent's `Principal.actor`), since its tool is on no server of ours to ask."""
    shown = clean_preview(text.strip()) or "(the agent's preview said nothing)"
    return Preview(shown, f"{asked_by} ({FROM_THE_AGENT})")


class Previewer:
    """Makes a call's preview with the run's tools. `redact` takes the server's secrets out
    of a result (`Redactor.values_only`), `redact_error` every key shape out of an error."""

    def __init__(
        self,
        tools: Tools,
        *,
        redact: Callable[[str], str] = lambda s: s,
        redact_error: Callable[[str], str] = lambda s: s,
    ) -> None:
        self.tools = tools
        self._redact = redact
        self._redact_error = redact_error

    async def preview(self, skill: Skill, tool: str, args: Mapping[str, Any]) -> Preview | None:
        """The preview of calling `tool` ("server.tool") with `args` (None: the tool has
        none). Never raises for the tool's sake: a failure is a preview that says so."""
        by = preview_tool(skill, tool)
        if by is None:
            return None
        server, _, name = by.partition(".")
        timeout = skill.rule(tool).preview_timeout
        try:
            async with asyncio.timeout(timeout):
                outcome = await self.tools.call(skill, server, name, dict(args), ask=None)
        except TimeoutError:
            return Preview(f"no preview: {by} did not answer within {timeout:g}s", by, True)
        except Exception as exc:  # a transport's failure is the preview's, never the card's
            why = self._redact_error(f"{type(exc).__name__}: {exc}")
            return Preview(clean_preview(f"no preview: {by} failed ({why})"), by, True)
        if outcome.is_error:
            why = self._redact_error(outcome.text)
            return Preview(clean_preview(f"no preview: {by} failed ({why})"), by, True)
        text = self._redact(outcome.text).strip() or "(the dry run said nothing)"
        return Preview(clean_preview(text), by)

    async def call(self, skill: Skill, tool: str, args: Mapping[str, Any]) -> tuple[bool, str]:
        """Call `tool` ("server.tool") outside any run, on a person's word (an FYI's Undo,
        `pizzabot.agent.undo`): whether it went well, and its text (or error), cleaned and
        redacted as a preview's is. Never raises for the tool's sake."""
        server, _, name = tool.partition(".")
        try:
            outcome = await self.tools.call(skill, server, name, dict(args), ask=None)
        except Exception as exc:  # a transport's failure is the call's outcome
            return False, clean_preview(self._redact_error(f"{type(exc).__name__}: {exc}"))
        if outcome.is_error:
            return False, clean_preview(self._redact_error(outcome.text))
        return True, clean_preview(self._redact(outcome.text).strip() or "(it said nothing)")

    async def risk_with_preview(
        self, skill: Skill, tool: str | None, args: Mapping[str, Any] | None, risk: Risk
    ) -> Risk:
        """`risk` with the preview of this call (unchanged where the tool has none)."""
        if tool is None or args is None:
            return risk
        made = await self.preview(skill, tool, args)
        return risk if made is None else replace(risk, preview=made)


def previewer_for(tools: Tools | None, redactor: Redactor | None) -> Previewer | None:
    """The previewer of a process that calls tools (None where it calls none)."""
    if tools is None:
        return None
    redact = redactor or Redactor()
    return Previewer(tools, redact=redact.values_only, redact_error=redact)


async def edited_preview(
    previewer: Previewer | None, skill: Skill | None, item: Item, args: Mapping[str, Any]
) -> Preview | None:
    """The preview an edit that keeps `item`'s card open puts on it, for the edited `args`
    (None: the call has no preview). The old one never stays: it showed other arguments."""
    if item.requested or item.tool is None:
        return None  # a request's tool is on no server of ours; its agent's text showed old args
    by = preview_tool(skill, item.tool) if skill is not None else None
    if by is None:
        by = item.risk.preview.by if item.risk.preview is not None else None
        if by is None:
            return None
    if previewer is None or skill is None:
        return Preview("no preview of the edited arguments: this server calls no tools", by, True)
    return await previewer.preview(skill, item.tool, args)
