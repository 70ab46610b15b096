"""Pizza Bot's MCP tools, for any MCP client: `request_approval` asks for a decision on a tool
call the client's agent wants to make, `ask_human` asks a question. Both file a request in
the inbox and return the decision when someone makes it.

- `tools`: the tools, over a `Desk` (`desk`) that reaches the inbox.
- `remote` and `stdio`: `pizzabot mcp`, asking a running server over HTTP.
- The server's own endpoint (`/mcp`, streamable HTTP) serves the same tools in-process.

Importing this package loads nothing of the MCP SDK; `tools` and `stdio` do.
"""
