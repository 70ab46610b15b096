"""What a run's tools are to the engine: the `Tools` protocol, and the nouns it speaks in.

The engine lists a skill's tools, shows them to the model and calls the ones it asks for;
where the tools live and how they are reached is a transport's business. MCP is one
(`pizzabot.agent.tools_mcp.ToolHub`, which the server wires); a test may bring a fake of a
few lines (`tests/peers/triggers.py`).

Tools reach the model as `server__tool` (provider-safe names) and policies speak of them as
`server.tool`.

A skill's rules may name arguments (`customer.country`), which only the tools' schemas can
confirm: `check_rules` refuses a skill whose rules lead into nothing a schema has. A
transport calls it when a skill's tools are listed anew (the skill loaded, or its servers
listed again), not on every step of a run.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from pizzabot.agent.policy.rules import ToolHints, check_paths
from pizzabot.agent.questions import Answer, Question
from pizzabot.agent.skills import Skill, SkillFileError

__all__ = [
    "SEP",
    "AskFn",
    "ToolOutcome",
    "ToolSpec",
    "Tools",
    "check_rules",
    "split_wire_name",
]

SEP = "__"

#: How a call in flight asks a person (`pizzabot.agent.asking.Asker.ask`).
AskFn = Callable[[Question], Awaitable[Answer]]
#: Who is asked, for a server by name, when connecting it needs a person (an OAuth consent).
ConnectFn = Callable[[str], AskFn]


@dataclass(frozen=True)
class ToolSpec:
    server: str
    name: str
    description: str
    schema: dict[str, Any]
    #: What the server says of the tool (MCP annotations): hints for cards, not checked.
    hints: ToolHints | None = None

    @property
    def qualified(self) -> str:
        """The name policies use: "server.tool"."""
        return f"{self.server}.{self.name}"

    @property
    def wire_name(self) -> str:
        """The name the model sees: "server__tool" (dots are not allowed by every provider)."""
        return f"{self.server}{SEP}{self.name}"

    def as_openai(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {
                "name": self.wire_name,
                "description": self.description[:1024],
                "parameters": self.schema or {"type": "object", "properties": {}},
            },
        }


@dataclass(frozen=True)
class ToolOutcome:
    text: str
    is_error: bool
    duration_ms: float


def split_wire_name(wire: str) -> tuple[str, str]:
    server, _, name = wire.partition(SEP)
    return server, name


def check_rules(skill: Skill, specs: Sequence[ToolSpec]) -> None:
    """Refuse `skill` when one of its rules names an argument that none of the listed tools
    it decides for has: a mistake in the skill file (`SkillFileError`, with the rule's
    line)."""
    problems = check_paths(skill, {s.qualified: s.schema for s in specs})
    if problems:
        where = skill.origin.path if skill.origin is not None else f"skill {skill.name}"
        raise SkillFileError(where, problems, name=skill.name)


class Tools(Protocol):
    """The tools of a skill's runs: list them, call one, and close what is kept open."""

    async def list_tools(
        self, skill: Skill, *, connect: ConnectFn | None = None
    ) -> Sequence[ToolSpec]:
        """Every tool `skill` may call. A skill whose rules name an argument its tools do not
        have is refused here, where the schemas are first known (`check_rules`). `connect`:
        who is asked when connecting a server needs a person (an OAuth consent)."""
        ...

    async def call(
        self,
        skill: Skill,
        server: str,
        tool: str,
        args: dict[str, Any],
        *,
        ask: AskFn | None = None,
    ) -> ToolOutcome:
        """Call a tool of `skill`. A failure is an outcome (`is_error`), which the model reads
        as the call's result. `ask`: how the call asks the person behind the run, should the
        tool need their input while it runs."""
        ...

    async def aclose(self) -> None:
        """Let go of what is kept open (connections, processes)."""
        ...
