"""Skills: what a user writes in YAML to describe one kind of background work.

A skill names the model, the MCP servers, the policy per tool, who may approve, where the
inbox goes and the budgets. Loading is strict: a bad file is refused with the file, the line
and what is wrong, and the other skills still load.

The package's modules, and what each holds:

- `skill`: the `Skill` model of one file, and its look-ups (a tool's rule, its approvers);
- `servers`, `tools`, `rules`, `people`, `budget`, `triggers`, `step_up`: the parts of a
  skill file;
- `groups`, `rota`, `ladder`: groups of people, who is on call, and a tool's escalation
  steps (`groups.yaml` in the skills folder holds groups every skill shares);
- `durations`: "30s", "15m", "2h", "1d";
- `errors`: `SkillFileError`, and pydantic's errors as lines and messages for the user;
- `loader`: `parse_skill` and `load_skills`;
- `book`: `SkillBook`, the skills a running server knows and their versions.

Import from `pizzabot.agent.skills`: every name below is exported here.
"""

from pizzabot.agent.skills.book import Refusal, Reload, SkillBook
from pizzabot.agent.skills.budget import Budget, DailyBudget
from pizzabot.agent.skills.durations import Duration, parse_duration
from pizzabot.agent.skills.errors import Problem, SkillFileError
from pizzabot.agent.skills.groups import GROUP, Group, SharedGroups, group_name, is_group
from pizzabot.agent.skills.ladder import Step
from pizzabot.agent.skills.loader import (
    GROUPS_FILES,
    LoadReport,
    load_skills,
    parse_groups,
    parse_skill,
)
from pizzabot.agent.skills.people import (
    IDENTITY_CHANNELS,
    Approvers,
    Deliver,
    Escalation,
    PeopleOrApprovers,
    Person,
)
from pizzabot.agent.skills.rota import OnCall, Shifts, WeeklyRota
from pizzabot.agent.skills.rules import OPERATORS, Check, Condition, Policy, Rule
from pizzabot.agent.skills.servers import Folder, HttpServer, StdioServer
from pizzabot.agent.skills.skill import Defaults, Origin, Skill, inbox_only
from pizzabot.agent.skills.step_up import RiskWord, StepUp, StepUpFor
from pizzabot.agent.skills.tools import DEFAULT_GRANTS, Approvals, ToolRule
from pizzabot.agent.skills.triggers import DigestAt, Hook, Schedule

__all__ = [
    "DEFAULT_GRANTS",
    "GROUP",
    "GROUPS_FILES",
    "IDENTITY_CHANNELS",
    "OPERATORS",
    "Approvals",
    "Approvers",
    "Budget",
    "Check",
    "Condition",
    "DailyBudget",
    "Defaults",
    "Deliver",
    "DigestAt",
    "Duration",
    "Escalation",
    "Folder",
    "Group",
    "Hook",
    "HttpServer",
    "LoadReport",
    "OnCall",
    "Origin",
    "PeopleOrApprovers",
    "Person",
    "Policy",
    "Problem",
    "Refusal",
    "Reload",
    "RiskWord",
    "Rule",
    "Schedule",
    "SharedGroups",
    "Shifts",
    "Skill",
    "SkillBook",
    "SkillFileError",
    "StdioServer",
    "Step",
    "StepUp",
    "StepUpFor",
    "ToolRule",
    "WeeklyRota",
    "group_name",
    "inbox_only",
    "is_group",
    "load_skills",
    "parse_duration",
    "parse_groups",
    "parse_skill",
]
