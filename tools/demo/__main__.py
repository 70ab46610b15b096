"""`python -m pizzabot.tools.demo`: the demo's MCP server over stdio."""

from pizzabot.tools.demo.server import main

main()
