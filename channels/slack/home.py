"""The app's Home tab in Slack: each person's own inbox, where Slack people look for an app.

A person's Home tab shows the Action items they may decide (with the very buttons a card has,
so the same listeners and approver rules apply, and with what those buttons' digest binds:
the arguments and the preview, cut short, who asked and the rule that asked), their recent
Unread items, a link to the web page and, for people who may start runs, a "Start a run"
button that opens a modal. Who sees what is the policy's answer
(`pizzabot.agent.policy.Access`), asked for the person's Slack user id.

`HomeTabs` publishes it (`views.publish`): when the person opens the tab, and again when their
items change. Changes are debounced and a view is only sent when it differs from the one last
sent, since Slack rate-limits `views.publish`; a slow poll catches changes that another
process made. A Home view holds at most 100 blocks, so long boxes end with "and N more on the
web page". A refresh is background work and gives way: it reads the boxes a page at a time
(`PAGE`), sorts out what each person may see a page at a time too, and pauses before each
page (`GIVE_WAY`) so what the event loop has to do meanwhile goes first. With a thousand cards
waiting, a decision made during a refresh, and the updates of its cards (a mail's several
SMTP round trips among them), wait for a page at most, not for the whole refresh.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import aiohttp
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from pizzabot.agent.errors import NotFound
from pizzabot.agent.model import Box, Item, ItemKind, ItemStatus, RunStatus
from pizzabot.agent.policy import SLACK, Principal
from pizzabot.agent.tasks import stop_if_cancelled
from pizzabot.channels.slack import blocks
from pizzabot.channels.slack.blocks import _context, _cut, _plain, _section, esc
from pizzabot.channels.slack.mrkdwn import args_label, args_text, asked_text
from pizzabot.channels.slack.ports import SlackDesk
from pizzabot.channels.slack.previews import preview_text

__all__ = [
    "START",
    "START_VIEW",
    "HomeInbox",
    "HomeTabs",
    "home_view",
    "start_modal",
    "start_values",
]

log = logging.getLogger(__name__)

#: action_id of the Home tab's "Start a run" button and callback_id of its modal.
START = "pizza_start"
START_VIEW = "pizza_start_view"

SKILL_BLOCK = "skill"
INPUT_BLOCK = "input"
_ACTION = "value"

ACTIONS_SHOWN = 20  # 3 blocks each: with the rest, a Home view stays under Slack's 100 blocks
UNREAD_SHOWN = 10
_HOME_BLOCKS = 100
_SKILL_OPTIONS = 100
_PENDING_READ = 1000  # pending actions read per refresh; more than that are counted as more
_UNREAD_READ = 200
#: Items read, or sorted by who may see them, at once: each page holds the event loop.
PAGE = 100
#: Seconds a refresh pauses before each page. Not zero: a card's update waiting on its peer's
#: answer (Slack's, the SMTP server's) is not ready yet when the page ends, and would then
#: wait for the next page too; a short pause lets the answer come and be handled first.
GIVE_WAY = 0.002
_VALUE_CUT = 80  # a proposed value longer than this is cut in a Home row
_ARGS_BUDGET = 600  # characters of arguments in one Home row, before the link takes over
_PREVIEW_CUT = 300  # characters of a preview in one Home row
_SECTION_ROOM = 2500  # of a section's 3,000: the rest for the label and the last link


@dataclass(frozen=True)
class HomeInbox:
    """What one person's Home tab shows: the lists are everything they may see, newest first;
    the view shows the first of each and counts the rest. `outcomes` says how the shown
    Unread items' runs ended, by item id (see `blocks.note_outcome`)."""

    actions: Sequence[Item]
    unread: Sequence[Item]
    may_start: bool
    outcomes: Mapping[str, RunStatus | None] = field(default_factory=dict)


def _action_blocks(item: Item, base_url: str) -> list[dict[str, Any]]:
    """An item as its card shows it, compactly: what its buttons' digest binds (the
    arguments, the preview, who asked, the rule and the approvals it needs) is on the row
    too."""
    url = blocks.item_url(base_url, item)
    what = {ItemKind.BUDGET: "budget reached", ItemKind.QUESTION: "question"}.get(
        item.kind, "approval needed"
    )
    lines = [f"*{esc(_cut(item.title, 200))}*"]
    if item.body:
        lines.append(esc(_cut(item.body, 300)))
    preview = preview_text(item, url=url, cut=_PREVIEW_CUT)
    if preview:
        lines.append(preview)
    if item.args or item.kind is ItemKind.TOOL:
        # Whatever the title, body and preview took (escaped, they can grow), the arguments
        # end with their link to the web page inside the section's 3,000 characters.
        room = min(_ARGS_BUDGET, _SECTION_ROOM - len("\n".join(lines)))
        shown = args_text(item.args, more_url=url, value_cut=_VALUE_CUT, budget=room)
        lines.append(f"*{args_label(item)}*\n{shown}")
    facts = [f"*{esc(_cut(item.skill, 100))}*: {what}", blocks.when(item.created_at)]
    if item.tool:
        tool, server = item.tool_place
        on = f" on `{esc(_cut(server, 100))}`" if server else ""
        facts.append(f"🔧 `{esc(_cut(tool, 100))}`{on}")
    facts += asked_text(item)
    facts.append(f"<{url}|Details on the web page>")
    return [
        _section("\n".join(lines)),
        _context(" · ".join(facts)),
        blocks.buttons(item),
    ]


def _unread_block(item: Item, base_url: str, outcome: RunStatus | None) -> dict[str, Any]:
    url = blocks.run_url(base_url, item.run_id)
    mark = blocks.outcome_mark(outcome)
    line = f"{mark} *{esc(_cut(item.title, 200))}* · {blocks.when(item.created_at)}"
    if item.body:
        line += "\n" + esc(_cut(item.body, 300))
    return _section(f"{line}\n<{url}|Open the run>")


def home_view(inbox: HomeInbox, *, base_url: str) -> dict[str, Any]:
    """The Home tab for one person: always within Slack's limits, however many items wait."""
    base = base_url.rstrip("/")
    web = f"{base}/"
    top: list[dict[str, Any]] = [
        {"type": "header", "text": _plain("Your Pizza Bot inbox")},
        _section(f"What your agents ask you and what they finished. <{web}|Open the web page>"),
    ]
    if inbox.may_start:
        top.append(
            {
                "type": "actions",
                "block_id": "home:start",
                "elements": [
                    {
                        "type": "button",
                        "action_id": START,
                        "text": _plain("Start a run"),
                        "style": "primary",
                        "value": "start",
                    }
                ],
            }
        )
    view: list[dict[str, Any]] = [
        *top,
        {"type": "divider"},
        {"type": "header", "text": _plain(f"Action ({len(inbox.actions)})")},
    ]
    if not inbox.actions:
        view.append(_context("Nothing waits for your decision."))
    for item in inbox.actions[:ACTIONS_SHOWN]:
        view += _action_blocks(item, base)
    more = len(inbox.actions) - ACTIONS_SHOWN
    if more > 0:
        view.append(_context(f"…and {more} more on the <{web}|web page>."))
    view += [
        {"type": "divider"},
        {"type": "header", "text": _plain(f"Unread ({len(inbox.unread)})")},
    ]
    if not inbox.unread:
        view.append(_context("Nothing unread."))
    for item in inbox.unread[:UNREAD_SHOWN]:
        view.append(_unread_block(item, base, inbox.outcomes.get(item.id)))
    more = len(inbox.unread) - UNREAD_SHOWN
    if more > 0:
        view.append(_context(f"…and {more} more on the <{web}|web page>."))
    assert len(view) <= _HOME_BLOCKS, "the Home layout outgrew Slack's 100 blocks"
    return {"type": "home", "callback_id": "pizza_home", "blocks": view}


def start_modal(skills: Sequence[tuple[str, str]]) -> dict[str, Any]:
    """Pick a skill, say what to do. `skills` are (name, description) pairs."""
    options = [
        {
            "text": _plain(name, 75),
            "value": name,
            **({"description": _plain(about, 75)} if about else {}),
        }
        for name, about in skills[:_SKILL_OPTIONS]
    ]
    return {
        "type": "modal",
        "callback_id": START_VIEW,
        "title": _plain("Start a run", 24),
        "submit": _plain("Start", 24),
        "close": _plain("Cancel", 24),
        "blocks": [
            {
                "type": "input",
                "block_id": SKILL_BLOCK,
                "label": _plain("Skill"),
                "element": {
                    "type": "static_select",
                    "action_id": _ACTION,
                    "options": options,
                    **({"initial_option": options[0]} if len(options) == 1 else {}),
                },
            },
            {
                "type": "input",
                "block_id": INPUT_BLOCK,
                "label": _plain("What should it do?"),
                "element": {
                    "type": "plain_text_input",
                    "action_id": _ACTION,
                    "multiline": True,
                    "max_length": 3000,
                },
            },
        ],
    }


def start_values(state_values: Mapping[str, Any]) -> tuple[str, str]:
    """(skill, input) from a submitted start modal; empty strings where nothing was given."""
    skill = (state_values.get(SKILL_BLOCK) or {}).get(_ACTION) or {}
    option = skill.get("selected_option") if isinstance(skill, Mapping) else None
    name = str(option.get("value") or "") if isinstance(option, Mapping) else ""
    text = (state_values.get(INPUT_BLOCK) or {}).get(_ACTION) or {}
    typed = str(text.get("value") or "") if isinstance(text, Mapping) else ""
    return name, typed.strip()


def _fingerprint(view: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(view, sort_keys=True).encode()).hexdigest()


class HomeTabs:
    """Publishes Home tabs. `opened` answers `app_home_opened`; `poke` says items changed
    (debounced by `debounce` seconds); `run_forever` does the republishing, and also looks
    every `poll` seconds for changes made in another process."""

    def __init__(
        self,
        *,
        client: AsyncWebClient,
        inbound: SlackDesk,
        debounce: float = 2.0,
        poll: float = 30.0,
        wake: asyncio.Event | None = None,
    ) -> None:
        self.client = client
        self.inbound = inbound
        self.debounce = debounce
        self.poll = poll
        self._sent: dict[str, str] = {}  # user -> fingerprint of the view last published
        self._seen: set[str] = set()  # people who opened the tab since this process started
        #: Rung by `poke`, or by whoever the composition root hands it to (the outbox's wake).
        self._wake = wake or asyncio.Event()
        self._pause = 0.0  # Slack's Retry-After, honoured before the next pass

    def poke(self) -> None:
        self._wake.set()

    async def inboxes(self, users: Sequence[str]) -> dict[str, HomeInbox]:
        """Every person's Home content, from one paged read of each box, shared by all."""
        pending = await self._read(Box.ACTION, ItemStatus.PENDING, _PENDING_READ)
        unread = await self._read(Box.UNREAD, ItemStatus.UNREAD, _UNREAD_READ)
        seen = {
            user: (await self._for(user, pending), await self._for(user, unread)) for user in users
        }
        shown = {i.id: i for _, notes in seen.values() for i in notes[:UNREAD_SHOWN]}
        outcomes = await self._outcomes(shown.values())
        return {
            user: HomeInbox(
                actions=actions,
                unread=notes,
                may_start=bool(self.inbound.access.may_start(Principal.of(SLACK, user))),
                outcomes=outcomes,
            )
            for user, (actions, notes) in seen.items()
        }

    async def _read(self, box: Box, status: ItemStatus, most: int) -> list[Item]:
        """Up to `most` of a box's items in `status`, newest first, a page at a time."""
        found: list[Item] = []
        before: tuple[datetime, str] | None = None
        while len(found) < most:
            await asyncio.sleep(GIVE_WAY)
            page = await self.inbound.store.list_items(
                box=box, status=status, limit=min(PAGE, most - len(found)), before=before
            )
            found += page
            if len(page) < PAGE:
                break
            before = (page[-1].created_at, page[-1].id)
        return found

    async def _for(self, user: str, items: Sequence[Item]) -> list[Item]:
        """Those of `items` the Slack user `user` may see, sorted a page at a time."""
        who = Principal.of(SLACK, user)
        access = self.inbound.access
        found: list[Item] = []
        for start in range(0, len(items), PAGE):
            await asyncio.sleep(GIVE_WAY)
            found += [i for i in items[start : start + PAGE] if access.may_see(who, i)]
        return found

    async def _outcomes(self, notes: Iterable[Item]) -> dict[str, RunStatus | None]:
        """How each note's run ended, by the note's id: one read per note shown."""
        found: dict[str, RunStatus | None] = {}
        for note in notes:
            try:
                run = await self.inbound.store.get_run(note.run_id)
            except NotFound:
                found[note.id] = None
                continue
            found[note.id] = blocks.note_outcome(note, run)
        return found

    async def opened(self, user: str, *, published_before: bool) -> None:
        """The person opened their Home tab: show it, fresh."""
        self._seen.add(user)
        if not published_before:
            self._sent.pop(user, None)  # Slack has nothing to show: send it whatever we sent
        inboxes = await self.inboxes([user])
        await self._publish(user, inboxes[user])

    async def refresh(self) -> int:
        """Republish every Home tab that changed; return how many were sent."""
        users = sorted(self._seen | self.inbound.access.starters(SLACK))
        if not users:
            return 0
        sent = 0
        for user, inbox in (await self.inboxes(users)).items():
            sent += await self._publish(user, inbox)
        return sent

    async def _publish(self, user: str, inbox: HomeInbox) -> int:
        view = home_view(inbox, base_url=self.inbound.base_url)
        mark = _fingerprint(view)
        if self._sent.get(user) == mark:
            return 0
        try:
            await self.client.views_publish(user_id=user, view=view)
        except SlackApiError as exc:
            headers = getattr(exc.response, "headers", None) or {}
            if getattr(exc.response, "status_code", None) == 429:
                with contextlib.suppress(TypeError, ValueError):
                    self._pause = max(self._pause, float(headers.get("Retry-After", 1)))
            log.warning("slack: views.publish for %s failed: %s", user, exc)
            return 0
        except (aiohttp.ClientError, TimeoutError) as exc:
            log.warning("slack: views.publish for %s failed: %s", user, exc)
            return 0
        self._sent[user] = mark
        return 1

    async def run_forever(self) -> None:
        while True:
            stop_if_cancelled()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.poll):
                    await self._wake.wait()
            # Let a burst of changes (a run's items, a decision and its result) settle, and
            # honour Slack's rate limit, before one pass publishes them all.
            await asyncio.sleep(max(self.debounce, self._pause))
            self._pause = 0.0
            self._wake.clear()
            try:
                await self.refresh()
            except Exception:
                log.exception("slack: Home tab refresh failed")
