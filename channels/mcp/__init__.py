"""Pizza Bot's own MCP server on the server (`/mcp`, streamable HTTP): the tools of
`pizzabot.client.mcp`, asking the server's requests in-process (`local`) as the principal
whose token the call carried (`http`)."""
