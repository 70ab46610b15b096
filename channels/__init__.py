"""Every face Pizza Bot shows the outside world, each a channel plugged into the engine:
Slack, email, the web page, Web Push to the browsers people subscribe, Teams, Discord,
Telegram, the HTTP API, the MCP endpoint, A2A, schedules and webhooks, and callbacks to a
requester.

A channel translates: it says who is asking (`pizzabot.agent.policy.Principal`), hands the
engine's calls what it heard, and shows what the engine made. It decides nothing itself.
`requests_wire` is the one translation of a request between the wire and the engine.
"""
