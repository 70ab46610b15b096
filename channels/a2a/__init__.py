"""A2A (the Agent2Agent protocol): a person as an A2A agent.

Another agent finds Pizza Bot's agent card at `/.well-known/agent-card.json`, sends it a
message at `/a2a` (JSON-RPC, bearer token), and the message becomes a request of one inbox-only
skill: a card on every channel. The A2A task is the request: it waits in `input-required`
while the card does, and completes with the decision. `serve` installs it; `tasks` translates
between A2A's shapes and the requests' wire; `agent` answers the protocol's methods.

Only a server that names a skill for A2A loads the `a2a` SDK (the `a2a` extra).
"""
