"""The demo's MCP server: one harmless `send_email` tool that only pretends, so a newcomer
sees an Action card with nothing configured (`manifests/skills/demo.yaml`)."""
