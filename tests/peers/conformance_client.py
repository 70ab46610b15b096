"""Pizza Bot's MCP client as the MCP conformance suite's "client under test".

The suite (`@modelcontextprotocol/conformance`, `conformance client --command ...`) starts a
test server for a scenario and runs this script with the server's URL as its last argument and
the scenario's name in `MCP_CONFORMANCE_SCENARIO` (with `MCP_CONFORMANCE_CONTEXT` for what a
scenario gives its client, such as a pre-registered client). The script does what a run of a
skill does with its MCP servers: a skill whose one server is the suite's (`auth: oauth` for the
`auth/*` scenarios), the run's `ToolHub` (the same client, clientInfo, elicitation and OAuth
code), every tool listed and called. The person behind the run is played by code: a consent
is given by following the authorization URL and handing the redirect to `McpAuth.finish`, as
the callback endpoint does; a form question is accepted with its proposed values (the schema's
defaults), as "approve" on a card does.

Exit status 0 when every tool answered without error.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import httpx

from pizzabot.agent.mcp_oauth import CALLBACK_PATH, McpAuth
from pizzabot.agent.questions import Answer, Question, with_defaults
from pizzabot.agent.skills import Skill
from pizzabot.agent.tools import AskFn
from pizzabot.agent.tools_mcp import ToolHub

REDIRECT = f"http://127.0.0.1:8787{CALLBACK_PATH}"
SECRET_ENV = "CONFORMANCE_CLIENT_SECRET"


def skill(url: str, scenario: str, context: dict[str, Any]) -> Skill:
    server: dict[str, Any] = {"url": url}
    if scenario.startswith("auth/"):
        server["auth"] = "oauth"
        if context.get("client_id"):
            server["client_id"] = context["client_id"]
        if context.get("client_secret"):
            server["client_secret"] = "${" + SECRET_ENV + "}"
    return Skill.model_validate(
        {
            "name": "conformance",
            "instructions": "Call every tool.",
            "model": "openai/none",
            "mcp_servers": {"suite": server},
            "tools": {"*": "auto"},
        }
    )


def person(auth: McpAuth) -> AskFn:
    async def ask(question: Question) -> Answer:
        if question.url is None:  # a form: accept what is proposed, defaults included
            return Answer("accept", with_defaults(question.schema, question.proposed))
        async with httpx.AsyncClient(timeout=30) as browser:
            sent = await browser.get(question.url)
        back = sent.headers.get("location", "")
        if not back.startswith(REDIRECT):
            print(f"the authorization did not redirect back: {sent.status_code}", file=sys.stderr)
            return Answer("decline")
        print(await auth.finish(dict(parse_qsl(urlsplit(back).query))), file=sys.stderr)
        return Answer("accept")

    return ask


def arguments(schema: dict[str, Any]) -> dict[str, Any]:
    """Plain values for a tool's required arguments."""
    plain = {"number": 2, "integer": 2, "string": "x", "boolean": True}
    props = schema.get("properties") or {}
    return {
        name: plain.get(props.get(name, {}).get("type"), "x") for name in schema.get("required", [])
    }


async def main(url: str) -> int:
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    env = {SECRET_ENV: str(context.get("client_secret", ""))}
    with tempfile.TemporaryDirectory() as folder:
        # A server with an https public URL serves its client metadata document and uses its
        # URL as the client ID; the suite's fixtures expect this one (and do not fetch it).
        document = "https://conformance-test.local/client-metadata.json"
        # The suite's sign-in pages are plain http on localhost, which a card would not offer;
        # here the "person" is this script, which follows them itself.
        auth = McpAuth(
            Path(folder),
            redirect_uri=REDIRECT,
            env=env,
            client_metadata_url=document,
            link_check=lambda _url: None,
        )
        hub = ToolHub(env=env, auth=auth, connect_timeout=20, call_timeout=20)
        ask = person(auth)
        run = skill(url, scenario, context)
        failed = 0
        try:
            for spec in await hub.list_tools(run, connect=lambda _server: ask):
                outcome = await hub.call(run, "suite", spec.name, arguments(spec.schema), ask=ask)
                print(f"{spec.name}: {outcome.text[:200]}", file=sys.stderr)
                failed += outcome.is_error
        finally:
            await hub.aclose()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[-1])))
