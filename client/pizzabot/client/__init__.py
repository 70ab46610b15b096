"""A small client of a Pizza Bot server, for agents Pizza Bot does not run.

An agent asks a person before a tool call (or asks a question) through the server's
requests API, and gets the decision back: approved, edited (with the new arguments),
rejected (with the reason) or expired. `AsyncInbox` and `Inbox` are the same client, async
and blocking. Using them loads httpx and pydantic only, never the server.

What goes over the wire is `pizzabot.client.wire`: the server takes and answers with the
same models. The framework adapters are modules of their own, each needing its optional extra:
`pizzabot.client.langgraph`, `pizzabot.client.pydantic_ai`, `pizzabot.client.openai_agents`;
and for agent protocols, `pizzabot.client.a2a` (a remote A2A agent's questions) and
`pizzabot.client.agui` (an AG-UI run's interrupts).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pizzabot.client._async import AsyncInbox
    from pizzabot.client._sync import Inbox
    from pizzabot.client._wire import InboxError, Retry
    from pizzabot.client.wire import RequestBody, RequestState

__all__ = ["AsyncInbox", "Inbox", "InboxError", "RequestBody", "RequestState", "Retry"]

#: Each name's module, imported when the name is first used: a subpackage that needs neither
#: (`pizzabot.client.hooks`, read by every `pizzabot` command) loads no httpx nor pydantic.
_WHERE = {
    "AsyncInbox": "pizzabot.client._async",
    "Inbox": "pizzabot.client._sync",
    "InboxError": "pizzabot.client._wire",
    "Retry": "pizzabot.client._wire",
    "RequestBody": "pizzabot.client.wire",
    "RequestState": "pizzabot.client.wire",
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
