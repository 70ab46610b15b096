"""Scenarios: stories through the engine in the test's own process, built by the composition
root, against real local peers over real sockets (the scripted model server, MCP servers, a
Slack recorder, IMAP/SMTP, Teams/Discord/Telegram stand-ins)."""
