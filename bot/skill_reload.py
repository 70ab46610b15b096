"""Skill files take effect while the server runs: no restart after fixing one.

Each process (server or worker) watches its own skills folder: every couple of seconds
(`PIZZABOT_SKILLS_WATCH`) it
compares the files' names, sizes and modification times, and on a change loads the folder
again; `POST /api/skills/reload` (`pizzabot skills --reload`) does it at once. Polling a
handful of small files costs nothing and works the same on bind mounts and network folders,
where file-system events are unreliable.

What a reload changes (see `pizzabot.agent.skills.SkillBook.update`): new runs get the new version;
runs already started keep the version they started with; a refused file leaves its skill's
last good version running. Hooks are looked up per request, so they follow at once; skill
schedules are synced right after the reload. Every reload that changed something is written
to the audit trail.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from pizzabot.agent.skills import LoadReport, Reload, SkillBook, load_skills
from pizzabot.store.sql import SqlStore

log = logging.getLogger("pizzabot")

#: Seconds between two looks at the skills folder (`PIZZABOT_SKILLS_WATCH`; 0: never).
WATCH_INTERVAL = 2.0

Fingerprint = tuple[tuple[str, int, int, int], ...]


def fingerprint(folder: Path) -> Fingerprint:
    """What changes when a skill file is added, removed, edited or replaced (editors that save
    through a new file change the inode even when size and time look the same)."""
    try:
        files = sorted([*folder.glob("*.yaml"), *folder.glob("*.yml"), *folder.glob("*.ics")])
    except OSError:
        return ()
    out = []
    for f in files:
        try:
            st = f.stat()
        except OSError:
            continue  # removed between the listing and the look
        out.append((f.name, st.st_mtime_ns, st.st_size, st.st_ino))
    return tuple(out)


def describe(change: Reload) -> dict[str, Any]:
    """A reload as the audit trail and the API show it."""
    return {
        "added": change.added,
        "changed": change.changed,
        "removed": change.removed,
        "refused": [
            {"path": r.error.path, "line": r.error.line, "message": r.error.message, "kept": r.kept}
            for r in change.refused
        ],
    }


class SkillFiles:
    """This process's skills folder, loaded into `book` again on a change or when asked."""

    def __init__(
        self,
        *,
        folder: Path,
        book: SkillBook,
        report: LoadReport,
        store: SqlStore,
        clock: Callable[[], datetime],
        interval: float = WATCH_INTERVAL,
    ) -> None:
        self.folder = folder
        self.book = book
        self.report = report
        self.store = store
        self.clock = clock
        self.interval = interval
        #: Called after every reload that changed something (sync schedules, warm servers).
        self.listeners: list[Callable[[Reload], Awaitable[None]]] = []
        self._seen = fingerprint(folder)
        self._lock = asyncio.Lock()

    async def reload(self, *, actor: str = "server", channel: str = "watch") -> Reload:
        """Load the folder again now; log and audit what changed."""
        async with self._lock:
            seen = await asyncio.to_thread(fingerprint, self.folder)
            report = await asyncio.to_thread(load_skills, self.folder)
            before = {str(r.error) for r in self.book.refused()}
            change = self.book.update(report, now=self.clock())
            self._seen, self.report = seen, report
            news = bool(change.added or change.changed or change.removed) or before != {
                str(r.error) for r in change.refused
            }
            if not news and channel == "watch":
                return change  # a file was touched, nothing in it changed
            level = logging.WARNING if change.refused else logging.INFO
            log.log(level, "skills reloaded from %s: %s", self.folder, change)
            await self.store.audit(
                action="skills_reloaded",
                actor=actor,
                channel=channel,
                now=self.clock(),
                detail={"folder": str(self.folder), **describe(change)},
            )
        for listener in self.listeners:
            try:
                await listener(change)
            except Exception:
                log.exception("after reloading the skills")
        return change

    async def watch(self) -> None:
        """Reload whenever the folder's files change; runs until cancelled."""
        while True:
            await asyncio.sleep(self.interval)
            try:
                if await asyncio.to_thread(fingerprint, self.folder) != self._seen:
                    await self.reload()
            except Exception:
                log.exception("watching the skills folder %s", self.folder)
