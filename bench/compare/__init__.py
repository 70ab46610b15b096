"""`pizzabot bench --compare langgraph`: Pizza Bot beside LangGraph on the same work.

Both run the same workload against the same scripted model server (`bench.model`, one
process for both) and the same MCP stdio tool server (`python -m bench.tools`, started
by each with this interpreter), alternately, part by part (A B A B A B), so both meet the same
moments of a noisy machine. The table gives each round's values and the median of the
per-round ratios (Pizza Bot ÷ LangGraph).

- `lgvenv`: the virtualenv LangGraph runs in, made by the bench with pinned versions (none of
  it is a dependency of Pizza Bot: `langchain-mcp-adapters` needs `mcp < 2`);
- `langgraph_side`: the LangGraph program, run by that virtualenv's Python, one process per
  part; it imports nothing of Pizza Bot;
- `pizza_side`: the same parts for Pizza Bot;
- `run`: the rounds, the ratios, the table and the JSON.

`pizzabot bench --compare awaithumans` is the request path beside awaithumans's server and SDK:
- `hitl`: its virtualenv's pins (made in a cache folder through `lgvenv`), both servers, the
  rounds, the table and the JSON;
- `hitl_agent`: the agents, run by each side's Python through each side's client library.
"""
