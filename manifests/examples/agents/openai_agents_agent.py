"""An OpenAI Agents SDK agent whose `send_email` waits for a person's decision in Pizza Bot.

    pip install -e '.[openai-agents]'    # or use make serve's .venv
    python manifests/examples/agents/openai_agents_agent.py

The tool has `needs_approval`, so the run stops with interruptions; Pizza Bot's decisions
approve or reject them on the run's state, and the run goes on from it. The SDK cannot run a
call with other arguments: an edit reaches the model as a reject carrying the new arguments.
"""

import asyncio

from _common import PROMPT, SKILL, model, send_email, server
from agents import Agent, OpenAIChatCompletionsModel, Runner, function_tool, set_tracing_disabled
from openai import AsyncOpenAI

from pizzabot.client import AsyncInbox
from pizzabot.client.openai_agents import decide_interruptions


async def main() -> None:
    set_tracing_disabled(True)  # no traces to OpenAI's servers
    async with model() as (base, name, key), AsyncInbox(*server()) as inbox:
        chat = OpenAIChatCompletionsModel(name, AsyncOpenAI(base_url=base, api_key=key))
        mailer = function_tool(send_email, needs_approval=True)
        agent = Agent(name="mailer", instructions="You mail customers.", model=chat, tools=[mailer])
        result = await Runner.run(agent, PROMPT)
        while result.interruptions:
            print("waiting for a decision in Pizza Bot…", flush=True)
            state = await decide_interruptions(inbox, SKILL, result)
            result = await Runner.run(agent, state)
        print("agent:", result.final_output)


asyncio.run(main())
