"""Pizza Bot's own MCP server: tools that ask a person, for any MCP client.

`request_approval` asks for a decision on a tool call the client's agent wants to make;
`ask_human` asks a question. Both file a request in the inbox (an Action item on every
channel, like any other) and return the decision when someone makes it.

- `bot.mcp_server.tools`: the tools, over a `Desk` (`bot.mcp_server.desk`).
- `bot.mcp_server.http`: `/mcp` on the server (streamable HTTP), asking in-process.
- `bot.mcp_server.stdio`: `pizzabot mcp`, asking a running server over HTTP.

Importing this package loads nothing of the MCP SDK: the server mounts `/mcp` at start and
loads the SDK with the first call.
"""
