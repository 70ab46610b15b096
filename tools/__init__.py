"""Tool servers Pizza Bot ships: MCP servers a skill may use like any other, started as
processes of their own. `files` serves the folders a skill grants (read; write where it
says); `demo` is the example skill's pretend mail outbox."""
