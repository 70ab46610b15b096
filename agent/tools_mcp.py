"""Tools through MCP: the `pizzabot.agent.tools.Tools` the server runs with. One warm client
per configured server, shared by every run of a skill.

Starting a stdio server costs about a second, so a resumed run must not wait for it: the
`ToolHub` keeps each server's client open (keyed by the server's configuration) until the
hub closes. A server's tools are listed when its client opens; a skill's rules are checked
against them (`pizzabot.agent.tools.check_rules`) when a version of the skill first meets that
listing (at warm-up, or the first step of its first run), not on every step of a run.

A stdio server is a child process, and a child inherits its parent's environment: here that
would hand every MCP server the Slack token, the mail passwords and the model key. So a
child's environment is built from nothing (`child_environment`), and what the MCP SDK adds on
its own is taken away again at launch.

A server may ask the person behind a run for input in the middle of a call (MCP
elicitation: a form, or a link to open). Every client declares that it can be asked, and
routes a server's question to the call in flight that asked it (`ToolHub.call`'s `ask`): on
the 2026 protocol's `input_required` results the SDK asks from inside the call itself, so
the call is known; a server-to-client request (older protocol versions) names no call, so
it goes to the connection's one call in flight, and is answered "cancel" when several runs
have calls in flight on that server at once (which of them asked cannot be known). A
question lives as long as its call (`pizzabot.agent.mcp_call`).

A server lives as long as a loaded skill uses it (`ToolHub.retain`, after every reload), and
says who calls it: `clientInfo` names Pizza Bot and its release. An HTTP server gets the
skill's headers, and its refusals are said in words (`pizzabot.agent.mcp_http`). A server with
`auth: oauth` gets a connection per skill (its tokens are the skill's), whose consent is asked
of the person behind the run that opens it (`pizzabot.agent.mcp_oauth`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import sys
import time
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from pizzabot.agent.mcp_call import CallQuestions, wind_down
from pizzabot.agent.mcp_connection import ASKING, Connection
from pizzabot.agent.mcp_http import HttpTarget, resolve_headers
from pizzabot.agent.mcp_identity import CLIENT_NAME, client_info
from pizzabot.agent.mcp_launch import BASE_ENV, child_environment, launch
from pizzabot.agent.mcp_oauth import McpAuth, oauth_provider
from pizzabot.agent.skills import HttpServer, Skill, StdioServer
from pizzabot.agent.tools import AskFn, ConnectFn, ToolOutcome, ToolSpec, check_rules

if TYPE_CHECKING:  # the SDK takes seconds to import: load it on the first connection
    import mcp_types
    from mcp.client import Client
    from mcp.client.stdio import StdioServerParameters

__all__ = ["BASE_ENV", "CLIENT_NAME", "ToolHub", "child_environment", "client_info"]

log = logging.getLogger(__name__)


def _params(
    name: str, cfg: StdioServer | HttpServer, env: Mapping[str, str]
) -> StdioServerParameters | HttpTarget:
    from mcp.client.stdio import StdioServerParameters

    if isinstance(cfg, HttpServer):
        headers = resolve_headers(name, cfg.headers, env)
        return HttpTarget(cfg.url, headers, oauth=cfg.auth == "oauth")
    # "python" names the interpreter Pizza Bot runs on, so bundled servers work in any venv.
    command = sys.executable if cfg.command in {"python", "python3"} else cfg.command
    child_env = child_environment(cfg, env)
    command, args = launch(command, list(cfg.args), child_env)
    return StdioServerParameters(command=command, args=args, env=child_env, cwd=cfg.cwd)


#: Seconds a broken connection is kept, after its call's questions were answered, so the
#: answers can still be sent on the session before it closes.
ANSWER_GRACE = 1.0


def _key(name: str, cfg: StdioServer | HttpServer, skill: str) -> str:
    """One connection per server name and configuration, shared by the skills that agree;
    an OAuth server's per skill too, since the tokens are the skill's."""
    oauth = isinstance(cfg, HttpServer) and cfg.auth == "oauth"
    return json.dumps([name, cfg.model_dump(), skill if oauth else None], sort_keys=True)


def _text_of(result: mcp_types.CallToolResult) -> str:
    """A call's result as the model reads it: its text blocks, other blocks as JSON."""
    parts: list[str] = []
    for block in result.content:
        text = getattr(block, "text", None)
        parts.append(text if isinstance(text, str) else json.dumps(block.model_dump(mode="json")))
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content))
    return "\n".join(parts)


class ToolHub:
    """Keeps MCP clients warm and routes tool calls to them."""

    def __init__(
        self,
        *,
        env: dict[str, str] | None = None,
        connect_timeout: float = 30.0,
        call_timeout: float = 600.0,
        extra_servers: Any = None,
        auth: McpAuth | None = None,
    ) -> None:
        """`env` is the server's own environment: stdio servers take from it only what
        `child_environment` lets through. `auth`: OAuth for `auth: oauth` servers (without
        it, such a server cannot be connected)."""
        self._env = dict(env or {})
        self.auth: McpAuth | None = None
        if auth is not None:
            self.use_auth(auth)
        self._connect_timeout = connect_timeout
        self._call_timeout = call_timeout
        self._conns: dict[str, Connection] = {}
        # A hook that adds servers a skill implies (the granted-folders server); set by bot/.
        self._extra_servers = extra_servers
        # Per skill: the version whose rules were checked last, and against which listings.
        self._checked: dict[str, tuple[Skill, tuple[int, ...]]] = {}
        # Servers no loaded skill uses, kept until their calls in flight end; their closing.
        self._retired: set[Connection] = set()
        self._closing: set[asyncio.Task[None]] = set()
        # Servers started ahead of any use (`launch`), until each is up or said to have failed.
        self._launching: set[asyncio.Task[None]] = set()

    def use_auth(self, auth: McpAuth) -> None:
        """Connect `auth: oauth` servers with `auth`; a revocation there closes the connection."""
        self.auth = auth
        auth.on_revoke.append(self.forget)

    def servers(self, skill: Skill) -> dict[str, StdioServer | HttpServer]:
        servers: dict[str, StdioServer | HttpServer] = dict(skill.mcp_servers)
        if self._extra_servers is not None:
            servers.update(self._extra_servers(skill))
        return servers

    def _conn(self, name: str, cfg: StdioServer | HttpServer, skill: str) -> Connection:
        key = _key(name, cfg, skill)
        conn = self._conns.get(key)
        if conn is None:
            conn = Connection(name, _params(name, cfg, self._env))
            if isinstance(cfg, HttpServer) and cfg.auth == "oauth":
                conn.auth = oauth_provider(self.auth, skill, name, cfg, conn.asks)
            self._conns[key] = conn
        conn.users.add(skill)
        return conn

    async def forget(self, skill: str, server: str) -> None:
        """Close `skill`'s OAuth connection to `server` (its tokens were revoked)."""
        for key, conn in list(self._conns.items()):
            if conn.auth is not None and conn.name == server and json.loads(key)[2] == skill:
                del self._conns[key]
                await conn.close()

    async def retain(self, skills: Iterable[Skill]) -> list[str]:
        """Stop every server none of `skills` (the versions loaded now) uses: a skill removed
        from disk, or changed so that a server's configuration differs, leaves no process or
        session behind. A server with calls in flight stops when its last call ends. A run
        that started on an older version and calls such a server again starts it anew.
        Returns the names of the servers stopped."""
        keep: dict[str, set[str]] = {}
        for skill in skills:
            for name, cfg in self.servers(skill).items():
                keep.setdefault(_key(name, cfg, skill.name), set()).add(skill.name)
        loaded = {name for users in keep.values() for name in users}
        self._checked = {k: v for k, v in self._checked.items() if k in loaded}
        stopped: list[str] = []
        for key, conn in list(self._conns.items()):
            if key in keep:
                conn.users = keep[key]
                continue
            del self._conns[key]
            stopped.append(conn.name)
            if conn.in_flight:
                self._retired.add(conn)  # closed by its last call (`call`'s end)
            else:
                await conn.close()
        return stopped

    def running(self) -> dict[str, list[str]]:
        """Per skill, the names of its servers that are connected now."""
        out: dict[str, list[str]] = {}
        for conn in self._conns.values():
            if conn.client is None:
                continue
            for skill in conn.users:
                out.setdefault(skill, []).append(conn.name)
        return {skill: sorted(names) for skill, names in sorted(out.items())}

    async def list_tools(self, skill: Skill, *, connect: ConnectFn | None = None) -> list[ToolSpec]:
        """Every tool of the skill's servers. The skill's rules are checked against the
        tools' schemas when this version of the skill first meets these listings (the
        first moment the schemas are known, and again whenever a server lists anew): a rule
        on an argument the tool does not have is refused (`SkillFileError`, with the rule's
        line). `connect`: who is asked to connect a server that needs a person's consent."""
        conns = [self._conn(name, cfg, skill.name) for name, cfg in self.servers(skill).items()]
        for conn in conns:
            await conn.open(self._connect_timeout, connect(conn.name) if connect else None)
        specs = [spec for conn in conns for spec in conn.tools]
        listings = tuple(conn.listing for conn in conns)
        checked = self._checked.get(skill.name)
        if checked is None or checked[0] is not skill or checked[1] != listings:
            check_rules(skill, specs)
            self._checked[skill.name] = (skill, listings)
        return specs

    async def warm(self, skill: Skill) -> None:
        await self.list_tools(skill)

    def launch(self, skill: Skill) -> None:
        """Start `skill`'s stdio servers in the background, ahead of anything that needs them
        (a process that has only just begun to boot). One that cannot start is started again
        by the warm-up (`warm`), which says why if it fails again, or by the skill's first use;
        the skill's rules are checked then too. HTTP servers wait for `warm`: an OAuth one may
        need a consent, kept in a database the process has not opened yet."""
        for name, cfg in self.servers(skill).items():
            if isinstance(cfg, StdioServer):
                task = asyncio.create_task(
                    self._launch(self._conn(name, cfg, skill.name)), name=f"launch:{name}"
                )
                self._launching.add(task)
                task.add_done_callback(self._launching.discard)

    async def _launch(self, conn: Connection) -> None:
        try:
            await conn.open(self._connect_timeout)
        except Exception as exc:  # the warm-up tries again, and says why if it fails too
            log.debug("MCP server %s not started yet: %s", conn.name, exc)

    async def call(
        self,
        skill: Skill,
        server: str,
        tool: str,
        args: dict[str, Any],
        *,
        ask: AskFn | None = None,
    ) -> ToolOutcome:
        """Call a tool. `ask`: how the call asks a person when the server asks for input
        (without it, the server is answered "cancel"); the time spent waiting for the
        answer does not count against the call's time-out."""
        cfg = self.servers(skill).get(server)
        if cfg is None:
            return ToolOutcome(f"no MCP server named {server!r} in skill {skill.name!r}", True, 0.0)
        conn = self._conn(server, cfg, skill.name)
        client = await conn.open(self._connect_timeout, ask)
        started = time.perf_counter()
        questions = CallQuestions(ask)
        token = conn.enter(questions)
        # The call runs in a task of its own, so a cancelled run can tell the server
        # "cancel" and let it wrap up before the call is dropped (`wind_down`).
        work = asyncio.create_task(self._call(client, tool, args, questions))
        try:
            result = await asyncio.shield(work)
        except asyncio.CancelledError:
            await wind_down(work, questions)
            raise
        except TimeoutError:
            return ToolOutcome(
                f"the tool did not answer within {self._call_timeout:.0f}s",
                True,
                (time.perf_counter() - started) * 1000,
            )
        except Exception as exc:
            said = conn.refused()
            # The server may have died; reconnect on the next call rather than keep a dead client.
            await self._replace(conn, questions)
            failed = f"tool call failed: {said or repr(exc)}"
            return ToolOutcome(failed, True, (time.perf_counter() - started) * 1000)
        finally:
            questions.end()  # a question still waiting is answered cancel, its item closed
            conn.leave(token)
            if conn in self._retired and not conn.in_flight:
                self._retired.discard(conn)
                self._closing.add(asyncio.create_task(conn.close(), name=f"mcp-stop:{server}"))
                for task in [t for t in self._closing if t.done()]:
                    self._closing.discard(task)
        duration = (time.perf_counter() - started) * 1000
        return ToolOutcome(_text_of(result), bool(result.is_error), duration)

    async def _replace(self, conn: Connection, questions: CallQuestions) -> None:
        """Let go of a connection a call failed on; the next call opens a new one. When the
        call had asked a question, the server may well live on (only the call's stream
        broke) and is owed the "cancel" that question was answered: the connection is
        closed in the background once that answer has had `ANSWER_GRACE` to go out."""
        if not questions.asked:
            await conn.close()
            return
        for key, held in list(self._conns.items()):
            if held is conn:
                del self._conns[key]

        async def close_later() -> None:
            await questions.settled()
            await asyncio.sleep(ANSWER_GRACE)  # the session sends the answer after it is given
            await conn.close()

        self._closing.add(asyncio.create_task(close_later(), name=f"mcp-replace:{conn.name}"))

    async def _call(
        self, client: Client, tool: str, args: dict[str, Any], questions: CallQuestions
    ) -> mcp_types.CallToolResult:
        ASKING.set(questions)  # this task's own context: the `input_required` path asks here
        # A timeout scope, not `wait_for`: on Python 3.11 `wait_for` can swallow a cancel.
        try:
            async with asyncio.timeout(self._call_timeout) as scope:
                questions.timed(scope)
                try:
                    return await client.call_tool(tool, args)
                finally:
                    questions.timed(None)  # the scope ends here: a late answer must not touch it
        finally:
            questions.end()  # however the call ended, no question of it waits any longer

    async def aclose(self) -> None:
        launching, self._launching = list(self._launching), set()
        for task in launching:
            task.cancel()
        for task in launching:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        conns, self._conns = [*self._conns.values(), *self._retired], {}
        self._retired = set()
        for conn in conns:
            await conn.close()
        for task in self._closing:
            await task
