"""`pizzabot bench`: the benchmark of the engine, a tool Pizza Bot ships beside the server.

The server never imports it. It needs psutil, which only the `bench` extra installs
(`pip install -r requirements-dev.lock`; the test environment has it).

- `runner`: the command: the workload's parts, the table and the JSON;
- `engine`: the parts that run the engine in this process (steps, decisions, memory);
- `procs`: the parts that time other processes (workers on PostgreSQL, `pizzabot serve`);
- `model`: the scripted model provider, in a process of its own (`python -m bench.model`);
- `tools`: the one no-op MCP tool (`python -m bench.tools`).
- `channels`: decisions through a real `pizzabot serve`'s Slack, web and requests API;
- `requests_path`: the request path with a crowd of agents waiting on long-polls;
- `crowd`: that crowd's requests made in the server's database, and its long-polls held by
  processes of their own (`python -m bench.crowd`);
- `fanout`: a decision → every other copy of its card (Slack, the web page, mail);
- `targets`: the targets, the table's rows, the figures of the parts measured at sizes;
- `compare`: `pizzabot bench --compare langgraph|awaithumans`, the same work beside another
  engine.

Kept light: the model and tool servers start as `python -m bench.<module>` and import this
first.
"""
