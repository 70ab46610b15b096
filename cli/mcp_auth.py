"""`pizzabot mcp-auth list|revoke`: the OAuth connections of skills' MCP servers (`auth: oauth`),
through the admin API. A token is never shown."""

from __future__ import annotations

from datetime import UTC, datetime
from urllib.parse import quote

from pizzabot.cli.common import JsonOpt, TokenOpt, UrlOpt, app, call, print_line
from pizzabot.cli.render import console, dump_json, empty, table, text_column, time_column, when
from pizzabot.cli.typer_app import App

mcp_auth_app = App(
    help="OAuth connections of skills' MCP servers: who holds tokens, and revoking them.",
    no_args_is_help=True,
)
app.add_typer(mcp_auth_app, name="mcp-auth")


@mcp_auth_app.command("list")
def mcp_auth_list(url: UrlOpt = None, token: TokenOpt = None, as_json: JsonOpt = False) -> None:
    """The skills' MCP servers that hold OAuth tokens, with their scopes."""
    data = call(url, token, "GET", "/api/mcp-auth")
    if as_json:
        dump_json(data)
        return
    if not data["items"]:
        empty("MCP OAuth connections: a run of a skill with `auth: oauth` asks to connect")
        return
    console.print(
        table(
            ["skill", "server", text_column("scopes", ratio=1), time_column("expires"), "refresh"],
            (
                [
                    c["skill"],
                    c["server"],
                    " ".join(c["scopes"]) or "-",
                    _expires(c["expires_at"]),
                    "yes" if c["refreshable"] else "no",
                ]
                for c in data["items"]
            ),
        )
    )


def _expires(at: float | None) -> str:
    if at is None:
        return "-"
    return when(datetime.fromtimestamp(at, UTC).isoformat())


@mcp_auth_app.command("revoke")
def mcp_auth_revoke(skill: str, server: str, url: UrlOpt = None, token: TokenOpt = None) -> None:
    """Forget a skill's tokens for an MCP server and revoke them at the service; its next run
    asks a person to connect again."""
    path = f"/api/mcp-auth/{quote(skill, safe='')}/{quote(server, safe='')}"
    data = call(url, token, "DELETE", path)
    print_line(f"{skill}: tokens for MCP server {server} forgotten here")
    said = str(data.get("at_service", "not said"))
    print_line("at the service: ", (said, "green" if said == "revoked" else "yellow"))
