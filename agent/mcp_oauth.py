"""OAuth 2.1 for a skill's hosted MCP servers (`auth: oauth`), through the SDK's client auth.

The SDK (`mcp.client.auth.OAuthClientProvider`) does the protocol: on a 401 it discovers the
protected resource and its authorization server, registers a client (or uses the skill's
pre-registered `client_id`), asks with PKCE for the scopes the challenge names, exchanges the
code, refreshes the tokens when they expire, and on `403 insufficient_scope` asks again for
the wider scope. What it leaves to its user is here:

- **The consent.** The first authorization is a person's: the authorization URL becomes a
  link question ("Connect crm.example") on the run that needs the server, on every channel
  the skill delivers to. The service sends the browser back to `/mcp-auth/callback` on this
  server; `McpAuth.finish` matches the `state` to the waiting connection (an unknown state is
  refused) and hands over the code. The SDK checks the state and the issuer again.
- **The tokens.** Kept per skill and server in the data folder, one JSON file each, readable
  by the server's user only (0600 in a 0700 folder), written whole or not at all. Listed and
  revoked by `pizzabot mcp-auth` through the admin API; a revocation also drops the live
  connection, so the next run asks for consent again.

    McpAuth            the consents waiting for their callback, the token files, list/revoke
      .provider(...)   an httpx auth for one connection (skill + server)
      .finish(params)  the callback: the code (or the service's refusal) to its connection
    TokenFiles         the SDK's `TokenStorage` on one file

Every byte of a callback is hostile: only a waiting `state` is accepted, and a refusal's
`error` is repeated only as a short token of letters and underscores.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import secrets
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import parse_qs, urlsplit

from pizzabot.agent.errors import RunError
from pizzabot.agent.mcp_call import CallQuestions
from pizzabot.agent.mcp_http import resolve_headers
from pizzabot.agent.questions import Question, link_refusal
from pizzabot.agent.skills import HttpServer

if TYPE_CHECKING:  # the SDK takes seconds to import: load it on the first connection
    from mcp.client.auth import OAuthClientProvider
    from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthToken

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


class TokenFiles:
    """The SDK's `TokenStorage` for one skill and server: one JSON file, 0600."""

    def __init__(self, path: Path, *, preset: OAuthClientInformationFull | None = None) -> None:
        self.path = path
        #: The skill's pre-registered client, used while the file holds none.
        self._preset = preset

    def read(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def _write(self, data: dict[str, Any]) -> None:
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        tmp = self.path.with_name(f".{self.path.name}.{secrets.token_hex(4)}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f)
        os.replace(tmp, self.path)  # whole or not at all

    async def get_tokens(self) -> OAuthToken | None:
        from mcp.shared.auth import OAuthToken

        raw = self.read().get("tokens")
        return OAuthToken.model_validate(raw) if isinstance(raw, dict) else None

    async def set_tokens(self, tokens: OAuthToken) -> None:
        data = self.read()
        data["tokens"] = tokens.model_dump(mode="json", exclude_none=True)
        data["saved_at"] = time.time()
        self._write(data)

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        from mcp.shared.auth import OAuthClientInformationFull

        raw = self.read().get("client")
        if isinstance(raw, dict):
            return OAuthClientInformationFull.model_validate(raw)
        return self._preset

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        data = self.read()
        data["client"] = client_info.model_dump(mode="json", exclude_none=True)
        self._write(data)

    def expires_at(self) -> float | None:
        """When the stored access token expires (None: unknown, or no token)."""
        data = self.read()
        tokens, saved = data.get("tokens"), data.get("saved_at")
        if not isinstance(tokens, dict) or not isinstance(saved, (int, float)):
            return None
        expires_in = tokens.get("expires_in")
        return saved + expires_in if isinstance(expires_in, (int, float)) else None


@dataclass(frozen=True)
class Connected:
    """A skill's server that holds tokens (what `pizzabot mcp-auth list` shows; no secret)."""

    skill: str
    server: str
    scopes: list[str]
    expires_at: float | None
    refreshable: bool


@dataclass
class _Waiting:
    """A consent whose callback has not come yet."""

    code: asyncio.Future[AuthorizationCodeResult]
    asking: asyncio.Task[Any]
    consent: Consent


@dataclass
class _Flow:
    """One connection's consents: its provider's redirect and callback handlers."""

    auth: McpAuth
    server: str
    url: str
    who: Callable[[], Consent | None]
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
        question = Question(
            message=f"Connect {host}: sign in there and allow access for this skill's runs.",
            url=authorization_url,
        )
        loop = asyncio.get_running_loop()
        asking = asyncio.create_task(consent.questions.ask(question), name=f"consent:{host}")
        self.auth.waiting[state] = _Waiting(loop.create_future(), asking, consent)
        self.state = state

    async def callback(self) -> AuthorizationCodeResult:
        from mcp.client.auth import OAuthFlowError

        state, self.state = self.state or "", None
        waiting = self.auth.waiting.get(state)
        if waiting is None:
            raise OAuthFlowError("no consent was asked for")
        host = self.host
        ending = "the connection it asked for was given up"
        try:
            await asyncio.wait({waiting.code, waiting.asking}, return_when="FIRST_COMPLETED")
            if not waiting.code.done():
                answer = waiting.asking.result()
                if answer.action != "accept":
                    said = "declined" if answer.action == "decline" else "not answered"
                    raise OAuthFlowError(f"the consent to connect it was {said}")
                async with asyncio.timeout(AFTER_DONE):  # Done pressed: the callback is near
                    await asyncio.shield(waiting.code)
            result = waiting.code.result()
            ending = f"connected to {host}"
            return result
        except TimeoutError:
            ending = self.error = f"{host} did not send the browser back to this server"
            raise OAuthFlowError(ending) from None
        except OAuthFlowError as exc:
            ending = self.error = f"not connected to {host}: {exc}"
            raise
        finally:
            self.auth.waiting.pop(state, None)
            if waiting.consent.asker is not None:
                waiting.consent.asker.ended = ending
            if not waiting.asking.done():
                waiting.asking.cancel()  # closes the card, with `ending`
                await asyncio.wait({waiting.asking})


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
    ) -> None:
        self.folder = folder
        #: Why a sign-in link cannot be offered to a person (None: it can); a card's rule.
        self.link_check = link_check
        self.redirect_uri = redirect_uri
        #: Where this client's metadata document is served (`client_document`): the client ID
        #: a service that supports client ID metadata documents takes instead of a registration.
        self.client_metadata_url = client_metadata_url
        self._env = dict(env or {})
        self.waiting: dict[str, _Waiting] = {}
        #: Called with (skill, server) when tokens are revoked: the live connection goes.
        self.on_revoke: list[Callable[[str, str], Awaitable[None]]] = []

    @classmethod
    def serving(cls, data_dir: Path, base_url: str, *, env: Mapping[str, str]) -> McpAuth:
        """A server's: token files under `data_dir/mcp-auth`, callbacks to `base_url`, and
        its client metadata document there when `base_url` is https (a service fetches it)."""
        document = base_url + DOCUMENT_PATH if base_url.startswith("https://") else None
        return cls(
            data_dir / "mcp-auth",
            redirect_uri=base_url + CALLBACK_PATH,
            env=env,
            client_metadata_url=document,
        )

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
            storage = TokenFiles(
                storage.path,
                preset=OAuthClientInformationFull(
                    **metadata.model_dump(exclude_none=True),
                    client_id=client_id["client_id"],
                    client_secret=(secret or {}).get("client_secret"),
                ),
            )
        flow = _Flow(self, server, cfg.url, who)
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

    def finish(self, params: Mapping[str, str]) -> tuple[int, str]:
        """The service's redirect back (`CALLBACK_PATH`): the status and the words of the page
        the person's browser shows."""
        from mcp.client.auth import OAuthFlowError
        from mcp.shared.auth import AuthorizationCodeResult

        state = params.get("state", "")
        waiting = self.waiting.get(state) if 0 < len(state) <= MAX_PARAM else None
        if waiting is None or waiting.code.done():
            return 400, "This link is not awaited here (it was used, or has expired)."
        if any(len(v) > MAX_PARAM for v in params.values()):
            return 400, "The answer is too long."
        error = params.get("error")
        if error is not None or not params.get("code"):
            said = error if error is not None and _ERROR.match(error) else "no code"
            waiting.code.set_exception(OAuthFlowError(f"the service refused: {said}"))
            return 200, f"Not connected: the service refused ({said}). You can close this page."
        waiting.code.set_result(
            AuthorizationCodeResult(code=params["code"], state=state, iss=params.get("iss"))
        )
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

    async def revoke(self, skill: str, server: str) -> bool:
        """Forget the tokens of `skill`'s `server` and drop its live connection; False when
        there were none."""
        path = self.files(skill, server).path
        try:
            path.unlink()
        except FileNotFoundError:
            return False
        for hook in self.on_revoke:
            await hook(skill, server)
        log.info("MCP server %s of skill %s: tokens revoked", server, skill)
        return True


def oauth_provider(
    auth: McpAuth | None,
    skill: str,
    server: str,
    cfg: HttpServer,
    who: Callable[[], Consent | None],
) -> OAuthClientProvider:
    """`auth`'s provider for one connection (`McpAuth.provider`); a process without OAuth (a
    `pizzabot worker`, which has no callback endpoint) says so."""
    if auth is None:
        raise RunError(f"MCP server {server!r} needs OAuth, which only `pizzabot serve` connects")
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
