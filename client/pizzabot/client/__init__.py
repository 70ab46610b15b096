"""A small client of a Pizza Bot server, for agents Pizza Bot does not run.

An agent asks a person before a tool call (or asks a question) through the server's
requests API, and gets the decision back: approved, edited (with the new arguments),
rejected (with the reason) or expired. `AsyncInbox` and `Inbox` are the same client, async
and blocking. Importing this package loads httpx and pydantic only, never the server.

What goes over the wire is `pizzabot.client.wire`: the server takes and answers with the
same models. The framework adapters are modules of their own, each needing its optional extra:
`pizzabot.client.langgraph`, `pizzabot.client.pydantic_ai`, `pizzabot.client.openai_agents`;
and for agent protocols, `pizzabot.client.a2a` (a remote A2A agent's questions) and
`pizzabot.client.agui` (an AG-UI run's interrupts).
"""

from pizzabot.client._async import AsyncInbox
from pizzabot.client._sync import Inbox
from pizzabot.client._wire import InboxError, Retry
from pizzabot.client.wire import RequestBody, RequestState

__all__ = ["AsyncInbox", "Inbox", "InboxError", "RequestBody", "RequestState", "Retry"]
