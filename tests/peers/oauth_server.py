"""A local OAuth 2.0 provider for mail tests: a token endpoint and an introspection endpoint.

Google and Microsoft hand a mail client a short-lived access token in exchange for a
long-lived refresh token; the mail server then checks that access token. Tests need both
halves on loopback, over real HTTP, so that the bot's refresh flow and dovecot's token check
are the real code paths:

    bot --POST /token (refresh_token)--> OAuthServer --access token--> bot
    bot --AUTHENTICATE XOAUTH2--> dovecot --POST /introspect (token=...)--> OAuthServer
    bot --AUTH XOAUTH2--> SMTP front (tests/peers/mailserver.py) --check_token--> OAuthServer

Tokens are random strings kept in memory. A test can make the endpoint fail for a while
(`fail_next`), revoke access tokens (`revoke_access_tokens`), and count refreshes.

The standard library's threaded HTTP server is enough: dovecot's auth process calls it
from another process, and aiosmtpd's thread calls `check_token` directly.
"""

from __future__ import annotations

import json
import secrets
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from urllib.parse import parse_qs


@dataclass
class _Grant:
    user: str
    client_id: str
    client_secret: str
    scope: str


@dataclass
class _State:
    grants: dict[str, _Grant] = field(default_factory=dict)  # refresh token -> grant
    access: dict[str, str] = field(default_factory=dict)  # access token -> user
    failures: list[int] = field(default_factory=list)  # statuses to answer next
    requests: list[dict[str, str]] = field(default_factory=list)  # token requests' forms
    introspections: int = 0


class OAuthServer:
    """The provider. Use as ``with OAuthServer() as provider:``."""

    host = "127.0.0.1"

    def __init__(self, *, expires_in: int = 3600, rotate: bool = False) -> None:
        self.expires_in = expires_in
        #: Each refresh hands out a new refresh token and retires the one used (strict
        #: rotation; Microsoft rotates too, though it lets the old one live out its days).
        self.rotate = rotate
        self._state = _State()
        self._lock = threading.Lock()
        self._http: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ----- what tests use --------------------------------------------------------------

    @property
    def port(self) -> int:
        if self._http is None:
            raise RuntimeError("OAuth server is not started")
        return int(self._http.server_address[1])

    @property
    def token_url(self) -> str:
        return f"http://{self.host}:{self.port}/token"

    @property
    def introspection_url(self) -> str:
        return f"http://{self.host}:{self.port}/introspect"

    def grant(self, user: str, *, client_id: str = "client-1", scope: str = "mail") -> Grant:
        """A refresh token for ``user`` (an address) issued to a fresh client secret."""
        refresh = "rt-" + secrets.token_urlsafe(24)
        secret = "cs-" + secrets.token_urlsafe(16)
        with self._lock:
            self._state.grants[refresh] = _Grant(user, client_id, secret, scope)
        return Grant(user=user, client_id=client_id, client_secret=secret, refresh_token=refresh)

    def issue_access_token(self, user: str) -> str:
        """An access token for ``user`` without a refresh (a token a test hands out itself)."""
        token = "at-" + secrets.token_urlsafe(24)
        with self._lock:
            self._state.access[token] = user
        return token

    def check_token(self, token: str) -> str | None:
        """The user an access token belongs to; None when unknown or revoked."""
        with self._lock:
            return self._state.access.get(token)

    def revoke_access_tokens(self) -> None:
        """Every access token issued so far stops working (refresh tokens keep working)."""
        with self._lock:
            self._state.access.clear()

    def fail_next(self, *statuses: int) -> None:
        """Answer the next token requests with these HTTP statuses, in order."""
        with self._lock:
            self._state.failures.extend(statuses)

    @property
    def token_requests(self) -> list[dict[str, str]]:
        """The forms posted to the token endpoint so far (including failed ones)."""
        with self._lock:
            return list(self._state.requests)

    @property
    def introspections(self) -> int:
        with self._lock:
            return self._state.introspections

    # ----- the endpoints ---------------------------------------------------------------

    def _token(self, form: dict[str, str]) -> tuple[int, dict[str, object]]:
        with self._lock:
            self._state.requests.append(form)
            if self._state.failures:
                status = self._state.failures.pop(0)
                return status, {"error": "temporarily_unavailable"}
            grant = self._state.grants.get(form.get("refresh_token", ""))
            if form.get("grant_type") != "refresh_token":
                return 400, {"error": "unsupported_grant_type"}
            if grant is None:
                return 400, {
                    "error": "invalid_grant",
                    "error_description": "Token has been expired or revoked.",
                }
            if (form.get("client_id"), form.get("client_secret")) != (
                grant.client_id,
                grant.client_secret,
            ):
                return 401, {"error": "invalid_client", "error_description": "Unauthorized"}
            token = "at-" + secrets.token_urlsafe(24)
            self._state.access[token] = grant.user
            body: dict[str, object] = {
                "access_token": token,
                "token_type": "Bearer",
                "expires_in": self.expires_in,
                "scope": form.get("scope") or grant.scope,
            }
            if self.rotate:
                rotated = "rt-" + secrets.token_urlsafe(24)
                del self._state.grants[form["refresh_token"]]
                self._state.grants[rotated] = grant
                body["refresh_token"] = rotated
            return 200, body

    def _introspect(self, form: dict[str, str]) -> tuple[int, dict[str, object]]:
        # RFC 7662's shape; dovecot is told to require "active" and to read "email".
        user = self.check_token(form.get("token", ""))
        with self._lock:
            self._state.introspections += 1
        if user is None:
            return 200, {"active": False}
        return 200, {"active": True, "email": user, "scope": "mail"}

    # ----- lifecycle -------------------------------------------------------------------

    def start(self) -> None:
        provider = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length).decode()
                form = {k: v[0] for k, v in parse_qs(raw, keep_blank_values=True).items()}
                if self.path == "/token":
                    status, body = provider._token(form)
                elif self.path == "/introspect":
                    status, body = provider._introspect(form)
                else:
                    status, body = 404, {"error": "not_found"}
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: object) -> None:
                pass  # tests read the counters, not a log

        self._http = ThreadingHTTPServer((self.host, 0), Handler)
        self._http.daemon_threads = True
        self._thread = threading.Thread(
            target=self._http.serve_forever, name="oauth-server", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        if self._http is not None:
            self._http.shutdown()
            self._http.server_close()
            self._http = None
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def __enter__(self) -> OAuthServer:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


@dataclass(frozen=True)
class Grant:
    """What a user hands the bot after consenting: client id and secret, refresh token."""

    user: str
    client_id: str
    client_secret: str
    refresh_token: str
