"""A LangGraph agent whose `send_email` waits for a person's decision in Pizza Bot.

    pip install -e '.[langgraph]' langchain-openai    # or use make serve's .venv
    python manifests/examples/agents/langgraph_agent.py

The agent is LangChain's `create_agent` with `HumanInTheLoopMiddleware`; its interrupt goes
to Pizza Bot as a request, and the graph resumes with the person's approve, edit or reject.
"""

import asyncio

from _common import PROMPT, SKILL, model, send_email, server
from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from pizzabot.client import AsyncInbox
from pizzabot.client.langgraph import decide_interrupts, tool_schemas


async def main() -> None:
    tools = [tool(send_email)]
    async with model() as (base, name, key), AsyncInbox(*server()) as inbox:
        graph = create_agent(
            ChatOpenAI(base_url=base, model=name, api_key=key),
            tools=tools,
            middleware=[HumanInTheLoopMiddleware(interrupt_on={"send_email": True})],
            checkpointer=InMemorySaver(),
        )
        config = {"configurable": {"thread_id": "example-1"}}
        result = await graph.ainvoke({"messages": [("user", PROMPT)]}, config, version="v2")
        while result.interrupts:
            print("waiting for a decision in Pizza Bot…", flush=True)
            resume = await decide_interrupts(
                inbox, SKILL, result.interrupts, schemas=tool_schemas(tools)
            )
            result = await graph.ainvoke(Command(resume=resume), config, version="v2")
        print("agent:", result.value["messages"][-1].content)


asyncio.run(main())
