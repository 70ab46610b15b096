"""A pydantic-ai agent whose `send_email` waits for a person's decision in Pizza Bot.

    pip install -e '.[pydantic-ai]'    # or use make serve's .venv
    python manifests/examples/agents/pydantic_ai_agent.py

The tool needs approval, so the run ends with `DeferredToolRequests`; Pizza Bot's decisions
come back as `DeferredToolResults` for the next run.
"""

import asyncio

from _common import PROMPT, SKILL, model, send_email, server
from pydantic_ai import Agent, DeferredToolRequests
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from pizzabot.client import AsyncInbox
from pizzabot.client.pydantic_ai import decide_deferred


async def main() -> None:
    async with model() as (base, name, key), AsyncInbox(*server()) as inbox:
        chat = OpenAIChatModel(name, provider=OpenAIProvider(base_url=base, api_key=key))
        agent = Agent(chat, output_type=[str, DeferredToolRequests])
        agent.tool_plain(requires_approval=True)(send_email)
        result = await agent.run(PROMPT)
        while isinstance(result.output, DeferredToolRequests):
            print("waiting for a decision in Pizza Bot…", flush=True)
            decided = await decide_deferred(inbox, SKILL, result.output)
            result = await agent.run(
                message_history=result.all_messages(), deferred_tool_results=decided
            )
        print("agent:", result.output)


asyncio.run(main())
