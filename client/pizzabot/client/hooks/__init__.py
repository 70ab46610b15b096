"""Coding agents' hooks (Claude Code, Codex, Gemini CLI, Cursor, Copilot CLI) in one place:
each host's payload read as a call (`hosts`), the call as a request a person can judge
(`request`), and the decision as the host's own allow or deny (`verdict`). The `pizzabot
hook` command and the server's hook endpoint both speak through these, so a host's format
changes here and nowhere else."""

from pizzabot.client.hooks.hosts import (
    HOSTS,
    SHELL_TOOL,
    HookAnswer,
    HookCall,
    HookInputError,
    Host,
    Verdict,
    unreadable_call,
)
from pizzabot.client.hooks.request import HookRequest, hook_request
from pizzabot.client.hooks.verdict import margin, verdict_of

__all__ = [
    "HOSTS",
    "SHELL_TOOL",
    "HookAnswer",
    "HookCall",
    "HookInputError",
    "HookRequest",
    "Host",
    "Verdict",
    "hook_request",
    "margin",
    "unreadable_call",
    "verdict_of",
]
