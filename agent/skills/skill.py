"""The skill: one file's whole model, with the checks that span its parts (named people,
server names) and the look-ups the engine makes (a tool's rule, its approvers)."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Annotated, Any

from pydantic import Field, PrivateAttr, field_validator, model_validator
from pydantic_core import PydanticCustomError

from pizzabot.agent.skills._base import Strict
from pizzabot.agent.skills.budget import Budget
from pizzabot.agent.skills.groups import Group, group_name, is_group, known_names
from pizzabot.agent.skills.people import (
    _PERSON,
    IDENTITY_CHANNELS,
    Approvers,
    Deliver,
    PeopleOrApprovers,
    Person,
)
from pizzabot.agent.skills.rules import Policy
from pizzabot.agent.skills.servers import Folder, HttpServer, StdioServer
from pizzabot.agent.skills.step_up import StepUp, StepUpFor
from pizzabot.agent.skills.tools import ToolRule
from pizzabot.agent.skills.triggers import DigestAt, Hook, Schedule


class Defaults(Strict):
    """What applies to a tool the skill does not list (in `tools`, nor by a pattern)."""

    #: For tools whose MCP annotations say read-only and not destructive; None: ask, as for
    #: any unlisted tool. Annotations are the tool server's own claims, so this is opt-in.
    read_only: Policy | None = None


@dataclass(frozen=True)
class Origin:
    """Where a skill came from: its file, and the line of each rule's condition (by tool
    entry, rule number from 1 and argument path), for problems found once its tools are known."""

    path: str
    lines: Mapping[tuple[str, int, str], int] = field(default_factory=dict)


#: What an inbox-only skill cannot have: each of these starts or serves runs of a model.
_RUN_ONLY = ("instructions", "mcp_servers", "folders", "schedules", "hooks", "model_options")


def inbox_only(name: str) -> str:
    """Why a run of an inbox-only skill cannot be started (by hand, schedule or webhook)."""
    return (
        f"{name} is inbox-only: it answers requests (POST /api/requests) and runs nothing "
        "itself; give it a model to start runs of it"
    )


#: How many tools' rules a skill keeps looked up (`Skill.entry`).
_ENTRIES_KEPT = 256
#: The rule of a tool the skill does not list (frozen, so one serves every such tool).
_UNLISTED = ToolRule()


class _Entries:
    """`Skill.entry`'s answers, for the `tools` mapping they were found in (a copy of the
    skill with other tools finds its own): a step looks a call's rule up several times. What
    a skill has looked up is not part of what it is, so two of these are always equal (a
    reloaded skill file that did not change is the same skill)."""

    __slots__ = ("found", "tools")

    def __init__(self) -> None:
        self.tools: object = None
        self.found: dict[str, tuple[str, ToolRule] | None] = {}

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Entries)

    __hash__ = None  # type: ignore[assignment]


class Skill(Strict):
    """One skill file. Without `model` it is *inbox-only*: it runs nothing itself and answers
    requests from agents Pizza Bot does not run (`pizzabot.agent.requests`), with its approvers,
    people, deliveries and tool rules."""

    name: Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9_-]*$")]
    description: str = ""
    instructions: str = ""
    #: A litellm model string; None: an inbox-only skill.
    model: str | None = None
    model_options: dict[str, Any] = {}
    mcp_servers: dict[str, StdioServer | HttpServer] = {}
    tools: dict[str, Policy | ToolRule] = {}
    budget: Budget = Budget()
    #: People by name, each with their identities (`alice: {slack: U012, email: a@x}`).
    people: dict[str, Person] = {}
    approvers: PeopleOrApprovers = Approvers()
    #: Groups of people by name (`sre: [alice, bob]`, or a rota), named as `group:sre`
    #: wherever people are (`pizzabot.agent.skills.groups`).
    groups: dict[str, Group] = {}
    deliver: Deliver = Deliver()
    folders: list[Folder] = []
    schedules: list[Schedule] = []
    hooks: list[Hook] = []
    max_tool_result_chars: int = 20_000
    defaults: Defaults = Defaults()
    #: The daily digest of this skill's waiting items (`pizzabot.agent.digest`); None: the server's.
    digest: DigestAt | None = None
    #: The environment variable holding the secret a request's `callback_url` POST is signed
    #: with (inbox-only skills; see docs/api.md); None: this skill's requests take no callback.
    callback_secret_env: Annotated[str | None, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")] = None
    #: False: whoever asked for a call may not approve it (a tool's entry may say otherwise).
    self_approval: bool = True
    #: Which approvals need a fresh passkey assertion: all, or by risk
    #: (`pizzabot.agent.skills.step_up`).
    step_up: StepUp | StepUpFor | None = None
    _origin: Origin | None = PrivateAttr(default=None)
    _entries: _Entries = PrivateAttr(default_factory=_Entries)

    @property
    def inbox_only(self) -> bool:
        """No model: the skill answers requests (`POST /api/requests`) and runs nothing."""
        return self.model is None

    @property
    def origin(self) -> Origin | None:
        """The file this skill was read from (None: built in code)."""
        return self._origin

    @field_validator("mcp_servers")
    @classmethod
    def _server_names(cls, v: dict[str, Any]) -> dict[str, Any]:
        for name in v:
            if not re.fullmatch(r"[A-Za-z0-9_-]+", name) or "__" in name:
                raise ValueError(f"server name {name!r}: use letters, digits, - and single _")
        return v

    @field_validator("people")
    @classmethod
    def _people(cls, v: dict[str, Person]) -> dict[str, Person]:
        owners: dict[tuple[str, str], str] = {}
        for name, person in v.items():
            if not _PERSON.match(name):
                raise ValueError(f"person {name!r}: use letters, digits, _, . and -")
            if all(person.on(c) is None for c in IDENTITY_CHANNELS):
                listed = ", ".join(IDENTITY_CHANNELS)
                raise ValueError(f"person {name!r} has no identity: give one or more of {listed}")
            for channel in IDENTITY_CHANNELS:
                identity = person.on(channel)
                if identity is None:
                    continue
                other = owners.setdefault((channel, identity), name)
                if other != name:
                    raise ValueError(f"{other} and {name} have the same {channel} {identity!r}")
        return v

    @model_validator(mode="after")
    def _model_or_inbox(self) -> Skill:
        if self.model is not None:
            if not self.instructions.strip():
                raise PydanticCustomError(
                    "instructions",
                    "instructions: a skill with a model needs instructions "
                    "(leave out model for an inbox-only skill that answers requests)",
                )
            return self
        given = [k for k in _RUN_ONLY if k in self.model_fields_set and getattr(self, k)]
        if given:
            raise PydanticCustomError(
                "inbox_only",
                "{key}: a skill without a model is inbox-only (it answers requests and runs "
                "nothing), so it has no {key}; give it a model to run one",
                {"key": given[0]},
            )
        return self

    @model_validator(mode="after")
    def _named_people(self) -> Skill:
        for name, group in self.groups.items():
            if not _PERSON.match(name):
                raise ValueError(f"group {name!r}: use letters, digits, _, . and -")
            known_names(("groups", name), group.named, self.people, None)
        lists: list[tuple[tuple[str | int, ...], list[str]]] = [
            (("approvers",), self.approvers.people)
        ]
        for key, entry in self.tools.items():
            if not isinstance(entry, ToolRule):
                continue
            if entry.escalate_to is not None:
                lists.append(
                    (("tools", key, "escalate_to", "approvers"), entry.escalate_to.approvers.people)
                )
            lists.append((("tools", key, "approvals", "of"), entry.approvals.of))
            lists += [
                (("tools", key, "escalate", i, "to"), s.to) for i, s in enumerate(entry.escalate)
            ]
            lists += [
                (("tools", key, "rules", n, "escalate", i, "to"), s.to)
                for n, rule in enumerate(entry.rules)
                for i, s in enumerate(rule.escalate)
            ]
        for where, names in lists:
            known_names(where, names, self.people, self.groups)
        return self

    def named(self, names: Iterable[str], at: datetime | None = None) -> list[str]:
        """The people `names` stands for at `at` (default: now): a person's name as it is, a
        group as its members (a rota: whoever is on call then)."""
        moment = at or datetime.now(UTC)
        out: dict[str, None] = {}
        for name in names:
            group = self.groups.get(group_name(name)) if is_group(name) else None
            if group is not None:
                out.update(dict.fromkeys(group.now(moment)))
            elif not is_group(name):
                out[name] = None
        return list(out)

    @model_validator(mode="after")
    def _people_apart(self) -> Skill:
        """A tool that needs several people needs to tell them apart: an identity listed on
        its own (not under `people:`) may be the same human as an approver on another
        channel, who would then count twice."""
        for key, entry in self.tools.items():
            if not isinstance(entry, ToolRule) or entry.approvals.required < 2:
                continue
            lists = [Approvers(people=entry.approvals.of) if entry.approvals.of else self.approvers]
            if entry.escalate_to is not None:
                lists.append(entry.escalate_to.approvers)
            steps = [*entry.escalate, *(s for rule in entry.rules for s in rule.escalate)]
            lists += [Approvers(people=step.to) for step in steps if step.to]
            pair = self._maybe_one_person(lists)
            if pair is None:
                continue
            first, second = pair
            raise PydanticCustomError(
                "people_apart",
                "{message}",
                {
                    "message": f"{entry.approvals.required} different people must approve "
                    f"{key}, but {first} and {second} may be one person, who would count "
                    "twice: list each approver under people: with every identity they have "
                    "(alice: {slack: U012ABC, email: alice@example.com}) and name them in "
                    "approvers (approvers: [alice, bob])",
                    "where": ("tools", key, "approvals"),
                },
            )
        return self

    @model_validator(mode="after")
    def _preview_servers(self) -> Skill:
        """A preview is a tool of the skill's own servers (`pizzabot.agent.preview`)."""
        servers = set(self.mcp_servers) | ({"files"} if self.folders else set())
        for key, entry in self.tools.items():
            if not isinstance(entry, ToolRule) or entry.preview is None:
                continue
            server = entry.preview.partition(".")[0]
            if server not in servers:
                known = ", ".join(sorted(servers)) or "none"
                raise PydanticCustomError(
                    "preview_server",
                    "{message}",
                    {
                        "message": f"{entry.preview} is on no server of this skill "
                        f"(its servers: {known}); a preview is a dry-run tool of one of them",
                        "where": ("tools", key, "preview"),
                    },
                )
        return self

    @model_validator(mode="after")
    def _undo_tools(self) -> Skill:
        """An Undo is a tool of the skill's own servers, on a tool whose FYI offers it."""
        servers = set(self.mcp_servers) | ({"files"} if self.folders else set())
        for key, entry in self.tools.items():
            if not isinstance(entry, ToolRule) or entry.undo is None:
                continue
            if entry.policy != "notify" and all(r.policy != "notify" for r in entry.rules):
                why = f"undo: only a notify tool's FYI offers Undo, and {key} is never notify"
            elif entry.undo.tool.partition(".")[0] not in servers:
                known = ", ".join(sorted(servers)) or "none"
                why = (
                    f"undo: {entry.undo.tool} is on no server of this skill (its servers: {known})"
                )
            else:
                continue
            where = ("tools", key, "undo")
            raise PydanticCustomError("undo_tool", "{message}", {"message": why, "where": where})
        return self

    def _maybe_one_person(self, lists: list[Approvers]) -> tuple[str, str] | None:
        """Two approvers of `lists` on different channels that nothing says are different
        people: an identity no person owns, and another channel's approver (such an
        identity, or a person with no identity on the first one's channel)."""
        owner = {
            (channel, identity): name
            for name, person in self.people.items()
            for channel in IDENTITY_CHANNELS
            if (identity := person.on(channel)) is not None
        }
        loose: list[tuple[str, str]] = []
        named: dict[str, None] = {}
        for listed in lists:
            for listed_name in listed.people:
                group = self.groups.get(group_name(listed_name)) if is_group(listed_name) else None
                named.update(dict.fromkeys(group.named if group is not None else [listed_name]))
            for channel in IDENTITY_CHANNELS:
                for identity in getattr(listed, channel):
                    name = owner.get((channel, identity))
                    if name is None:
                        loose.append((channel, identity))
                    else:
                        named[name] = None
        for channel, identity in loose:
            for other, elsewhere in loose:
                if other != channel:
                    return f"{channel} {identity}", f"{other} {elsewhere}"
            for name in named:
                person = self.people.get(name)
                if (
                    person is not None
                    and person.on(channel) is None
                    and any(person.on(c) is not None for c in IDENTITY_CHANNELS if c != channel)
                ):
                    return f"{channel} {identity}", name
        return None

    def approvers_for(
        self,
        tool: str | None,
        channel: str,
        *,
        at: datetime | None = None,
        asked_at: datetime | None = None,
        asked: int | None = None,
    ) -> list[str]:
        """Who may decide an item of `tool` ("server.tool"; None for a budget item) on a
        channel ("slack": user ids, "email": lowercased addresses, "teams", "discord",
        "telegram": their ids) at `at` (default: now): the skill's approvers (or the tool's
        `approvals.of`) plus the approvers that tool's items escalate to (see `Escalation`)
        and, for an item asked at `asked_at`, the steps of its ladder that have come (the
        ladder of the tool's rule `asked`, when that rule asked and has one); a named
        person, or a group's member (on call at `at`), with their identity on that channel."""
        approvers: list[str] = []
        for listed in self.decider_lists(tool, at, asked_at, asked):
            approvers += getattr(listed, channel, []) if channel in IDENTITY_CHANNELS else []
            for name in self.named(listed.people, at):
                identity = self.people[name].on(channel)
                if identity is not None:
                    approvers.append(identity)
        return approvers

    def decider_lists(
        self,
        tool: str | None,
        at: datetime | None,
        asked_at: datetime | None,
        asked: int | None = None,
    ) -> list[Approvers]:
        if not tool:
            return [self.approvers]
        rule = self.rule(tool).asked_by(asked)
        lists = [Approvers(people=rule.approvals.of) if rule.approvals.of else self.approvers]
        if rule.escalate_to is not None:
            lists.append(rule.escalate_to.approvers)
        if asked_at is not None:
            waited = ((at or datetime.now(UTC)) - asked_at).total_seconds()
            lists += [Approvers(people=s.to) for s in rule.escalate if s.to and waited >= s.after]
        return lists

    def self_approval_for(self, tool: str | None) -> bool:
        """Whether whoever asked for a call of `tool` may approve it themselves: the tool's
        `self_approval`, else the skill's."""
        own = self.rule(tool).self_approval if tool else None
        return self.self_approval if own is None else own

    def approver_names(
        self,
        tool: str | None,
        *,
        at: datetime | None = None,
        asked_at: datetime | None = None,
        asked: int | None = None,
    ) -> list[str]:
        """The people (`people:` names) among the approvers of an item of `tool` at `at`, as
        `approvers_for` finds them."""
        lists = self.decider_lists(tool, at, asked_at, asked)
        return self.named([n for listed in lists for n in listed.people], at)

    def approvals_required(self, tool: str | None) -> int:
        """How many different people must approve a call of `tool` (1 for a budget item)."""
        return self.rule(tool).approvals.required if tool else 1

    def rule(self, tool: str) -> ToolRule:
        """The rule for "server.tool": exact name first, then the longest matching pattern.

        An unlisted tool is `ask`: the safe default is to have a human look.
        """
        listed = self.entry(tool)
        return listed[1] if listed is not None else _UNLISTED

    def entry(self, tool: str) -> tuple[str, ToolRule] | None:
        """The `tools` entry that covers "server.tool" and its key (the name or the pattern);
        None when the skill does not list it."""
        kept = self._entries
        if kept.tools is not self.tools:
            kept.tools, kept.found = self.tools, {}
        if tool not in kept.found:
            if len(kept.found) >= _ENTRIES_KEPT:  # names can come from a model: keep a few
                kept.found.clear()
            kept.found[tool] = self._find_entry(tool)
        return kept.found[tool]

    def _find_entry(self, tool: str) -> tuple[str, ToolRule] | None:
        rules = {
            k: (ToolRule(policy=v) if isinstance(v, str) else v) for k, v in self.tools.items()
        }
        if tool in rules:
            return tool, rules[tool]
        matches = [p for p in rules if any(c in p for c in "*?[") and fnmatch.fnmatchcase(tool, p)]
        if matches:
            key = max(matches, key=len)
            return key, rules[key]
        return None
