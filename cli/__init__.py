"""The client commands of `pizzabot`: a client of the HTTP API that imports nothing of the
server, so a terminal on another device works the same way (`--url`, `--token`).

    common.py     the Typer app, the server's address and token, one line per answer
    runs.py       run, runs, show, cancel, say
    items.py      item, inbox, approve, edit, reject, read
    control.py    kill, skills, audit
    stats.py      stats: approval fatigue, measured
    grants.py     grants, revoke, tokens …
    mcp_auth.py   mcp-auth list|revoke: skills' MCP servers' OAuth tokens
    schedules.py  schedules …
    ask.py        ask, mcp: for agents Pizza Bot does not run
    hook*.py      hook HOST, hook install HOST: coding agents' hooks
    a2a.py        a2a watch: a remote A2A agent's questions, answered from the inbox
    client.py     where the server and its token are, and every failure as one line
    ids.py        ids as people type them: a unique beginning, as the web shows it
    render.py     tables, a run's timeline, an item's card

The server's own commands (`serve`, `worker`, `audit verify`/`export`, `policy test`,
`backup`, `restore`)
are added by `pizzabot.bot.main`.
"""

from pizzabot.cli import runs, items, control, grants, schedules, away, stats, mcp_auth  # noqa: I001 - the order of `--help`
from pizzabot.cli.a2a import a2a_app
from pizzabot.cli.ask import register as register_ask
from pizzabot.cli.common import app
from pizzabot.cli.hook import hook_app
from pizzabot.cli.hook_install import install as hook_install

register_ask(app)
hook_app.command("install")(hook_install)
app.add_typer(hook_app, name="hook")
app.add_typer(a2a_app, name="a2a")

__all__ = ["app", "away", "control", "grants", "items", "mcp_auth", "runs", "schedules", "stats"]
