"""The skills a running server knows (`SkillBook`): the newest of each for new runs, the
versions older runs started with, and what a reload changed (`Reload`)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from pizzabot.agent.errors import NotFound
from pizzabot.agent.skills.errors import SkillFileError
from pizzabot.agent.skills.loader import LoadReport
from pizzabot.agent.skills.skill import Skill

_EPOCH = datetime.min.replace(tzinfo=UTC)


@dataclass(frozen=True)
class Refusal:
    """A file the last load refused; `kept` names the skill whose last good version keeps
    running in its place (None: nothing of it runs)."""

    error: SkillFileError
    kept: str | None = None


@dataclass(frozen=True)
class Reload:
    """What loading the folder again changed."""

    added: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    refused: list[Refusal] = field(default_factory=list)

    @property
    def kept(self) -> list[str]:
        return [r.kept for r in self.refused if r.kept]

    def __str__(self) -> str:
        parts = [
            f"{what} {', '.join(names)}"
            for what, names in (
                ("added", self.added),
                ("changed", self.changed),
                ("removed", self.removed),
            )
            if names
        ]
        for r in self.refused:
            keeps = f" (skill {r.kept} keeps its last good version)" if r.kept else ""
            parts.append(f"refused {r.error}{keeps}")
        return "; ".join(parts) or "nothing changed"


class SkillBook:
    """The skills the server knows, by name; loaded again as a whole when the files change.

    Every version a skill had since the process started is kept (up to `KEEP_VERSIONS`), so a
    run goes on with the version it started with (`for_run`) while new runs get the newest.
    A file that is refused does not take its skill away: the last good version keeps running.
    """

    KEEP_VERSIONS = 50

    def __init__(
        self,
        skills: dict[str, Skill] | None = None,
        *,
        paths: dict[str, Path] | None = None,
        refused: Iterable[SkillFileError] = (),
    ) -> None:
        self._skills = dict(skills or {})
        self._paths = dict(paths or {})
        self._refused = [Refusal(e) for e in refused]
        # The first versions count from the beginning of time: runs created before this
        # process started use them.
        self._versions = {n: [(_EPOCH, s)] for n, s in self._skills.items()}
        #: How many times a load changed a skill: what was worked out from the skills before
        #: (the approval clock's next moments) may be out of date when it grows.
        self.generation = 0

    @classmethod
    def of(cls, report: LoadReport) -> SkillBook:
        return cls(report.skills, paths=report.paths, refused=report.errors)

    def get(self, name: str) -> Skill:
        """The newest good version of a skill; NotFound says why when its file was refused."""
        try:
            return self._skills[name]
        except KeyError:
            raise NotFound(self._why_not(name)) from None

    def for_run(self, name: str, created_at: datetime) -> Skill:
        """The version of a skill that was newest when a run was created (a run keeps the
        skill it started with, across reloads; after a restart, the oldest one kept)."""
        versions = self._versions.get(name)
        if not versions:
            return self.get(name)
        fitting = [s for since, s in versions if since <= created_at]
        return fitting[-1] if fitting else versions[0][1]

    def _why_not(self, name: str) -> str:
        for r in self._refused:
            if r.error.name == name:
                return f"skill {name!r} was refused: {r.error}"
        for r in self._refused:
            if r.error.name is None and Path(r.error.path).stem == name:
                return f"no skill named {name!r}; its file was refused: {r.error}"
        known = ", ".join(sorted(self._skills)) or "none"
        return f"no skill named {name!r}; known: {known}"

    def update(self, report: LoadReport, *, now: datetime) -> Reload:
        """Take a new load of the folder; a refused file keeps its skill's last good version."""
        old, old_paths = self._skills, self._paths
        new, paths = dict(report.skills), dict(report.paths)
        refused: list[Refusal] = []
        for err in report.errors:
            kept = err.name if err.name in old and err.name not in new else None
            if kept is None:  # the name could not be read: the file's previous skill
                kept = next(
                    (n for n, p in old_paths.items() if str(p) == err.path and n not in new),
                    None,
                )
            if kept is not None:
                new[kept], paths[kept] = old[kept], old_paths[kept]
            refused.append(Refusal(err, kept))
        change = Reload(
            added=sorted(set(new) - set(old)),
            changed=sorted(n for n in set(new) & set(old) if new[n] != old[n]),
            removed=sorted(set(old) - set(new)),
            refused=refused,
        )
        self._record(new, now)
        self._skills, self._paths, self._refused = new, paths, refused
        if change.added or change.changed or change.removed:
            self.generation += 1
        return change

    def replace(self, skills: dict[str, Skill]) -> None:
        self._record(skills, datetime.now(UTC))
        self._skills = dict(skills)
        self.generation += 1

    def _record(self, skills: dict[str, Skill], now: datetime) -> None:
        for name, skill in skills.items():
            versions = self._versions.setdefault(name, [])
            if not versions or versions[-1][1] != skill:
                versions.append((now, skill))
                del versions[: -self.KEEP_VERSIONS]

    def refused(self) -> list[Refusal]:
        """The files the last load refused, and which skill each leaves running."""
        return list(self._refused)

    def path(self, name: str) -> Path | None:
        return self._paths.get(name)

    def all(self) -> list[Skill]:
        return [self._skills[k] for k in sorted(self._skills)]

    def __contains__(self, name: object) -> bool:
        return name in self._skills
