"""The engine: skills, runs, model calls, tools, policy, budgets and the inbox.

`agent` is the core of Pizza Bot and imports no other package of the project. The outside
plugs in through two small protocols: a `Store` (persistence, see `pizzabot.agent.store`) and a
`Channel` (delivery, see `pizzabot.agent.channel`). Channels turn what comes in into calls of the
public functions in `pizzabot.agent.inbox` and `pizzabot.agent.runs`.
"""
