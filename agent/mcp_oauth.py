"""OAuth 2.1 for a skill's hosted MCP servers (`auth: oauth`), through the SDK's client auth.

The SDK (`mcp.client.auth.OAuthClientProvider`) does the protocol: on a 401 it discovers the
protected resource and its authorization server, registers a client (or uses the skill's
pre-registered `client_id`), asks with PKCE for the scopes the challenge names, exchanges the
code, refreshes the tokens when they expire, and on `403 insufficient_scope` asks again for
the wider scope. What it leaves to its user is here:

- **The consent.** The first authorization is a person's: the authorization URL becomes a
  link question ("Connect crm.example") on the run that needs the server, on every channel
  the skill delivers to. The service sends the browser back to `/mcp-auth/callback` on the
  public URL, which may reach any server process: `McpAuth.finish` records the code against
  the consent's `state` (`pizzabot.agent.mcp_consents`; an unknown or used state is refused),
  and the process that holds the run, a server or a worker, takes it and exchanges it. The
  SDK checks the state and the issuer again.
- **The tokens.** Kept per skill and server in the data folder, one JSON file each, readable
  by the server's user only (0600 in a 0700 folder), written whole or not at all
  (`pizzabot.agent.mcp_tokens`). Listed and revoked by `pizzabot mcp-auth` through the admin
  API; a revocation also drops the live connection, so the next run asks for consent again,
  and sends the tokens to the service's revocation endpoint (RFC 7009).

    McpAuth            the consents in progress, the token files, list/revoke
      .provider(...)   an httpx auth for one connection (skill + server)
      .finish(params)  the callback: the code (or the service's refusal) to its consent

Every byte of a callback is hostile: only a waiting `state` is accepted, and a refusal's
`error` is repeated only as a short token of letters and underscores.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import parse_qs, urlsplit

from pizzabot.agent.errors import RunError
from pizzabot.agent.mcp_call import CallQuestions
from pizzabot.agent.mcp_consents import Consents, MemoryConsents, Pending, Returned, state_key
from pizzabot.agent.mcp_http import resolve_headers
from pizzabot.agent.mcp_tokens import Connected, TokenFiles, revoke_at_service
from pizzabot.agent.questions import Question, link_refusal
from pizzabot.agent.skills import HttpServer

if TYPE_CHECKING:  # the SDK takes seconds to import: load it on the first connection
    from mcp.client.auth import OAuthClientProvider
    from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull

__all__ = [
    "CALLBACK_PATH",
    "DOCUMENT_PATH",
    "Connected",
    "Consent",
    "McpAuth",
    "TokenFiles",
    "oauth_provider",
]

log = logging.getLogger(__name__)

#: Where the service sends the person's browser back to (on this server's public URL).
CALLBACK_PATH = "/mcp-auth/callback"
#: Where this client's metadata document is served (a client ID metadata document).
DOCUMENT_PATH = "/mcp-auth/client.json"
#: Seconds a connection waits for the callback after the person pressed Done on the card.
AFTER_DONE = 60.0
#: The longest callback parameter taken (codes and states are far shorter).
MAX_PARAM = 2000
#: How long a consent's state is taken back: as long as its card waits.
CONSENT_LIFE = timedelta(hours=1)
#: Seconds between looks for a callback that came to another process.
POLL = 0.5

_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}$")
_ERROR = re.compile(r"^[A-Za-z_]{1,40}$")


class Ending(Protocol):
    """What closes a consent card: the reason it shows (`pizzabot.agent.asking.Asker`)."""

    ended: str


@dataclass
class Consent:
    """Who is asked to connect a server now: the questions of the connection being opened by
    a run (or of its call in flight, on a step-up), and the asker behind them, whose card
    then says how the consent ended."""

    questions: CallQuestions
    asker: Ending | None = None


@dataclass
class _Waiting:
    """A consent of this process whose answer has not been taken yet."""

    #: Set when the answer came to this process (otherwise it is polled for).
    poke: asyncio.Event
    asking: asyncio.Task[Any]
    consent: Consent


@dataclass
class _Flow:
    """One connection's consents: its provider's redirect and callback handlers."""

    auth: McpAuth
    server: str
    url: str
    who: Callable[[], Consent | None]
    skill: str = ""
    #: The state of the consent in progress.
    state: str | None = None
    #: Why the last consent failed, in words (the connection says it on the run).
    error: str | None = None

    @property
    def host(self) -> str:
        return urlsplit(self.url).hostname or self.url

    async def redirect(self, authorization_url: str) -> None:
        host = self.host
        consent = self.who()
        self.error = None
        if consent is None or not consent.questions.can_ask:
            self.error = f"{host} wants a person to connect it (OAuth): a run of the skill asks"
            raise RunError(f"MCP server {self.server!r}: {self.error}")
        why = self.auth.link_check(authorization_url)
        if why is not None:  # a card offers https links only, and only plain ones
            self.error = f"{host}'s sign-in link cannot be offered: {why}"
            raise RunError(f"MCP server {self.server!r}: {self.error}")
        state = parse_qs(urlsplit(authorization_url).query).get("state", [""])[0]
        key = state_key(state)
        now = self.auth.now()
        pending = Pending(self.skill, self.server, _run_of(consent.asker))
        # Kept before the card goes out: its callback may come to any process at once.
        await self.auth.consents.open(key, pending, now=now, expires_at=now + CONSENT_LIFE)
        question = Question(
            message=f"Connect {host}: sign in there and allow access for this skill's runs.",
            url=authorization_url,
        )
        asking = asyncio.create_task(consent.questions.ask(question), name=f"consent:{host}")
        self.auth.waiting[key] = _Waiting(asyncio.Event(), asking, consent)
        self.state = state

    async def callback(self) -> AuthorizationCodeResult:
        from mcp.client.auth import OAuthFlowError

        state, self.state = self.state or "", None
        key = state_key(state)
        waiting = self.auth.waiting.get(key)
        if waiting is None:
            raise OAuthFlowError("no consent was asked for")
        host = self.host
        ending = "the connection it asked for was given up"
        code = asyncio.create_task(self.auth.returned(state, waiting.poke))
        try:
            await asyncio.wait({code, waiting.asking}, return_when="FIRST_COMPLETED")
            if not code.done():
                answer = waiting.asking.result()
                if answer.action != "accept":
                    said = "declined" if answer.action == "decline" else "not answered"
                    raise OAuthFlowError(f"the consent to connect it was {said}")
                async with asyncio.timeout(AFTER_DONE):  # Done pressed: the callback is near
                    await asyncio.shield(code)
            result = code.result()
            ending = f"connected to {host}"
            return result
        except TimeoutError:
            ending = self.error = f"{host} did not send the browser back to Pizza Bot"
            raise OAuthFlowError(ending) from None
        except OAuthFlowError as exc:
            ending = self.error = f"not connected to {host}: {exc}"
            raise
        finally:
            code.cancel()
            self.auth.waiting.pop(key, None)
            if waiting.consent.asker is not None:
                waiting.consent.asker.ended = ending
            if not waiting.asking.done():
                waiting.asking.cancel()  # closes the card, with `ending`
            await asyncio.wait({code, waiting.asking})
            await asyncio.shield(self.auth.forget(key))


def _run_of(asker: Ending | None) -> str | None:
    """The run a consent is asked for (an `Asker` holds it)."""
    run = getattr(getattr(asker, "held", None), "run", None)
    run_id = getattr(run, "id", None)
    return run_id if isinstance(run_id, str) else None


class McpAuth:
    """OAuth for every `auth: oauth` server: consents in progress, and the token files under
    `folder` (`<skill>/<server>.json`). `redirect_uri` is this server's callback URL."""

    def __init__(
        self,
        folder: Path,
        *,
        redirect_uri: str,
        env: Mapping[str, str] | None = None,
        client_metadata_url: str | None = None,
        link_check: Callable[[str], str | None] = link_refusal,
        consents: Consents | None = None,
    ) -> None:
        self.folder = folder
        #: Where consents wait for their callback: the database, where processes share one.
        self.consents: Consents = consents if consents is not None else MemoryConsents()
        #: Why a sign-in link cannot be offered to a person (None: it can); a card's rule.
        self.link_check = link_check
        self.redirect_uri = redirect_uri
        #: Where this client's metadata document is served (`client_document`): the client ID
        #: a service that supports client ID metadata documents takes instead of a registration.
        self.client_metadata_url = client_metadata_url
        self._env = dict(env or {})
        self.waiting: dict[str, _Waiting] = {}
        #: The skills' pre-registered clients, by (skill, server): a revocation's credentials.
        self._presets: dict[tuple[str, str], OAuthClientInformationFull] = {}
        #: Called with (skill, server) when tokens are revoked: the live connection goes.
        self.on_revoke: list[Callable[[str, str], Awaitable[None]]] = []

    @classmethod
    def serving(cls, data_dir: Path, base_url: str, *, env: Mapping[str, str]) -> McpAuth:
        """A server's or a worker's: token files under `data_dir/mcp-auth`, callbacks to
        `base_url` (the public URL: any server process behind it), and the client metadata
        document there when `base_url` is https (a service fetches it)."""
        document = base_url + DOCUMENT_PATH if base_url.startswith("https://") else None
        return cls(
            data_dir / "mcp-auth",
            redirect_uri=base_url + CALLBACK_PATH,
            env=env,
            client_metadata_url=document,
        )

    @staticmethod
    def now() -> datetime:
        """The time consents are kept and answered by."""
        return datetime.now(UTC)

    def client_document(self) -> dict[str, Any] | None:
        """This client's metadata document (None: none is served)."""
        if self.client_metadata_url is None:
            return None
        return {
            "client_id": self.client_metadata_url,
            "client_name": "Pizza Bot",
            "redirect_uris": [self.redirect_uri],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": "none",
        }

    def files(self, skill: str, server: str) -> TokenFiles:
        for name in (skill, server):
            if not _NAME.match(name):
                raise RunError(f"{name[:60]!r} cannot name a token file")
        return TokenFiles(self.folder / skill / f"{server}.json")

    def provider(
        self, skill: str, server: str, cfg: HttpServer, who: Callable[[], Consent | None]
    ) -> OAuthClientProvider:
        """The httpx auth of one connection; `who` says whom to ask when consent is needed."""
        from mcp.shared.auth import OAuthClientInformationFull

        storage = self.files(skill, server)
        secret = None
        if cfg.client_secret is not None:
            secret = resolve_headers(server, {"client_secret": cfg.client_secret}, self._env)
        # RFC 6749 2.3.1: every server takes HTTP Basic for a client with a secret.
        method = "client_secret_basic" if secret else "none"
        metadata = _classes()[1](
            client_name="Pizza Bot",
            redirect_uris=[self.redirect_uri],  # type: ignore[list-item]
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            token_endpoint_auth_method=method,  # type: ignore[arg-type]
            scope=" ".join(cfg.scopes) or None,
        )
        metadata.keep(cfg.scopes)
        if cfg.client_id is not None:
            # A client ID can be named as ${NAME} too, like the secret (it is not secret, but
            # it differs per installation).
            client_id = resolve_headers(server, {"client_id": cfg.client_id}, self._env)
            preset = OAuthClientInformationFull(
                **metadata.model_dump(exclude_none=True),
                client_id=client_id["client_id"],
                client_secret=(secret or {}).get("client_secret"),
            )
            storage = TokenFiles(storage.path, preset=preset)
            self._presets[(skill, server)] = preset
        flow = _Flow(self, server, cfg.url, who, skill)
        made: OAuthClientProvider = _classes()[0](
            cfg.url,
            metadata,
            storage,
            flow.redirect,
            flow.callback,
            client_metadata_url=self.client_metadata_url,
            flow=flow,
        )
        return made

    async def returned(self, state: str, poke: asyncio.Event) -> AuthorizationCodeResult:
        """The code of the consent of `state`, once the service sent it back to any process
        (polled; at once when it came here), or the service's refusal raised."""
        from mcp.client.auth import OAuthFlowError
        from mcp.shared.auth import AuthorizationCodeResult

        key, got = state_key(state), None
        while got is None:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(POLL):
                    await poke.wait()
            poke.clear()
            try:
                got = await self.consents.take(key)
            except Exception:  # the database away for a moment: the card still waits
                log.warning("a consent's answer could not be read; looking again", exc_info=True)
        if got.code is None:
            raise OAuthFlowError(f"the service refused: {got.error or 'no code'}")
        return AuthorizationCodeResult(code=got.code, state=state, iss=got.iss)

    async def forget(self, key: str) -> None:
        """Drop a consent given up (an unreachable database: it expires by itself)."""
        try:
            await self.consents.drop(key)
        except Exception:
            log.warning("a consent given up could not be dropped; it expires", exc_info=True)

    async def finish(self, params: Mapping[str, str]) -> tuple[int, str]:
        """The service's redirect back (`CALLBACK_PATH`), on any process: the status and the
        words of the page the person's browser shows."""
        state = params.get("state", "")
        if not 0 < len(state) <= MAX_PARAM:
            return 400, "This link is not awaited here (it was used, or has expired)."
        if any(len(v) > MAX_PARAM for v in params.values()):
            return 400, "The answer is too long."
        key, error, code = state_key(state), params.get("error"), params.get("code")
        if error is not None or not code:
            said = error if error is not None and _ERROR.match(error) else "no code"
            returned = Returned(error=said)
        else:
            returned = Returned(code=code, iss=params.get("iss"))
        if await self.consents.answer(key, returned, now=self.now()) is None:
            return 400, "This link is not awaited here (it was used, or has expired)."
        waiting = self.waiting.get(key)
        if waiting is not None:
            waiting.poke.set()
        if returned.code is None:
            return 200, f"Not connected: the service refused ({said}). You can close this page."
        return 200, "Connected. You can close this page."

    def connected(self) -> list[Connected]:
        """Every skill's server that holds tokens, by skill and server."""
        out: list[Connected] = []
        for path in sorted(self.folder.glob("*/*.json")):
            files = TokenFiles(path)
            tokens = files.read().get("tokens")
            if not isinstance(tokens, dict):
                continue
            scope = tokens.get("scope")
            out.append(
                Connected(
                    skill=path.parent.name,
                    server=path.stem,
                    scopes=scope.split() if isinstance(scope, str) else [],
                    expires_at=files.expires_at(),
                    refreshable=bool(tokens.get("refresh_token")),
                )
            )
        return out

    async def revoke(self, skill: str, server: str) -> str | None:
        """Forget the tokens of `skill`'s `server`, drop its live connection, and send the
        tokens to the service's revocation endpoint (RFC 7009): what the service did, in
        words (None: there were no tokens). The tokens are forgotten here whatever it did."""
        files = self.files(skill, server)
        data = files.read()
        try:
            files.path.unlink()
        except FileNotFoundError:
            return None
        for hook in self.on_revoke:
            await hook(skill, server)
        client = data.get("client")
        if not isinstance(client, dict) and (skill, server) in self._presets:
            client = self._presets[(skill, server)].model_dump(mode="json", exclude_none=True)
        at_service = await revoke_at_service(data, client if isinstance(client, dict) else None)
        log.info(
            "MCP server %s of skill %s: tokens revoked (service: %s)", server, skill, at_service
        )
        return at_service


def oauth_provider(
    auth: McpAuth | None,
    skill: str,
    server: str,
    cfg: HttpServer,
    who: Callable[[], Consent | None],
) -> OAuthClientProvider:
    """`auth`'s provider for one connection (`McpAuth.provider`); a process without OAuth
    says so."""
    if auth is None:
        raise RunError(f"MCP server {server!r} needs OAuth, which this process does not connect")
    return auth.provider(skill, server, cfg, who)


def _classes() -> tuple[Any, Any]:
    """The SDK's provider and client metadata, with what a long-lived server needs on top
    (defined on first use: the SDK takes seconds to import)."""
    global _CLASSES
    if _CLASSES is None:
        _CLASSES = (_provider_class(), _metadata_class())
    return _CLASSES


def _provider_class() -> Any:
    from mcp.client.auth import OAuthClientProvider

    class Provider(OAuthClientProvider):
        def __init__(self, *args: Any, flow: _Flow, **kw: Any) -> None:
            super().__init__(*args, **kw)
            #: The consents of this connection (`flow.error`: why the last one failed).
            self.flow = flow

        async def _initialize(self) -> None:
            # The SDK takes stored tokens as valid for ever; their saved expiry lets an expired
            # token be refreshed after a restart instead of asking a person again.
            await super()._initialize()
            storage = self.context.storage
            if isinstance(storage, TokenFiles):
                self.context.token_expiry_time = storage.expires_at()

        async def _handle_token_response(self, response: Any) -> None:
            # A consent's tokens: where the service takes them back is kept beside them.
            await super()._handle_token_response(response)
            storage = self.context.storage
            if isinstance(storage, TokenFiles):
                storage.set_service(self.context.oauth_metadata)

        async def _auth_flow(self, request: Any) -> Any:
            # The SDK's own refusals (a registration or a token request the service refused)
            # are said without the service's words, which are hostile bytes.
            from mcp.client.auth import OAuthFlowError, OAuthRegistrationError, OAuthTokenError

            flow = super()._auth_flow(request)
            try:
                sent = await flow.__anext__()
                while True:
                    sent = await flow.asend((yield sent))
            except StopAsyncIteration:
                return
            except OAuthRegistrationError:
                self.flow.error = f"{self.flow.host} refused to register Pizza Bot as a client"
                raise
            except OAuthTokenError:
                self.flow.error = f"{self.flow.host} refused the token request"
                raise
            except OAuthFlowError:
                if self.flow.error is None:  # not a consent's own failure: the discovery's
                    self.flow.error = f"{self.flow.host}: its OAuth metadata was refused"
                raise

    return Provider


def _metadata_class() -> Any:
    from mcp.client.auth.utils import union_scopes
    from mcp.shared.auth import OAuthClientMetadata
    from pydantic import PrivateAttr

    class Metadata(OAuthClientMetadata):
        # The SDK sets the scope from each challenge before it registers and asks; the
        # skill's own `scopes` stay part of it, at registration and at every consent.
        _kept: str | None = PrivateAttr(default=None)

        def keep(self, scopes: list[str]) -> None:
            self._kept = " ".join(scopes) or None

        def __setattr__(self, name: str, value: Any) -> None:
            if name == "scope":
                value = union_scopes(value, self._kept)
            super().__setattr__(name, value)

    return Metadata


#: The provider and client metadata classes (typed loosely: they subclass the SDK's lazily).
_CLASSES: tuple[Any, Any] | None = None
