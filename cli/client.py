"""The CLI's HTTP client: where the server and its token are, and every failure as one line.

A person at a terminal should never read a traceback or a Python repr: a server that is not
running, a refused token, a 404 or a 422 each become one `CliError` whose message says what
went wrong and what to do next. `pizzabot.cli.typer_app` prints it and exits non-zero.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported by the first call: `pizzabot serve` starts without an HTTP client
    import httpx

__all__ = ["DEFAULT_URL", "Api", "ApiError", "CliError", "connect", "detail_text"]

DEFAULT_URL = "http://127.0.0.1:8787"


class CliError(Exception):
    """A failure the CLI reports as one line, then exits with `code`."""

    def __init__(self, message: str, *, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


class ApiError(CliError):
    """The server answered with an error status; `detail` is its `{"detail": ...}`."""

    def __init__(self, status: int, detail: Any, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.detail = detail


def _data_dir() -> Path:
    # The server's default (bot.settings); the CLI reads only the two variables it documents.
    default = Path.home() / ".local" / "share" / "pizzabot"
    return Path(os.environ.get("PIZZABOT_DATA_DIR") or default)


@dataclass(frozen=True)
class Api:
    """One server: its URL, its token, and where that token came from (for a 401's message)."""

    url: str
    token: str
    token_from: str
    #: The token was read from the server's own token file (the owner's, scope admin).
    from_file: bool = False

    def call(self, method: str, path: str, **kw: Any) -> Any:
        import httpx

        try:
            with httpx.Client(
                base_url=self.url, headers={"Authorization": f"Bearer {self.token}"}, timeout=30
            ) as c:
                r = c.request(method, path, **kw)
        except httpx.TimeoutException:
            raise CliError(f"The server at {self.url} did not answer in 30 s.") from None
        except httpx.HTTPError as exc:
            raise CliError(
                f"Cannot reach the server at {self.url} ({_reason(exc)}): start it with "
                "`pizzabot serve` (or `make serve`), or pass --url / set PIZZABOT_URL."
            ) from None
        if r.status_code >= 400:
            raise self._error(r)
        try:
            return r.json()
        except ValueError:
            raise CliError(
                f"{self.url} answered {r.status_code} with something that is not JSON: "
                "is --url a Pizza Bot server?"
            ) from None

    def _error(self, r: httpx.Response) -> ApiError:
        try:
            body = r.json()
        except ValueError:
            body = None
        detail = body.get("detail") if isinstance(body, dict) else None
        if detail is None:
            # A proxy's HTML page or a stack dump: its first words are enough.
            text = " ".join(r.text.split())
            detail = (text[:200] + "…" if len(text) > 200 else text) or r.reason_phrase
        if r.status_code == 401:
            return ApiError(
                401,
                detail,
                f"401: the server refused the API token {self.token_from}. The server's token "
                "is its own PIZZABOT_API_TOKEN, or else the api-token file in its data folder "
                f"({_data_dir() / 'api-token'} here): pass it with --token or "
                "PIZZABOT_API_TOKEN.",
            )
        if r.status_code == 404 and detail == "Not Found":
            return ApiError(
                404, detail, f"404: {self.url} has no such API route: is --url a Pizza Bot server?"
            )
        return ApiError(r.status_code, detail, f"{r.status_code}: {detail_text(detail)}")


def _reason(exc: httpx.HTTPError) -> str:
    text = str(exc)
    if "Errno 111" in text or "Connection refused" in text:
        return "connection refused"
    if "Name or service not known" in text or "nodename nor servname" in text:
        return "unknown host"
    return text or type(exc).__name__


def detail_text(detail: Any) -> str:
    """A server's error detail on one line: a string, `{message, errors: {field: message}}`,
    an already-decided item, or FastAPI's list of pydantic errors."""
    if isinstance(detail, str):
        return " ".join(detail.split())
    if isinstance(detail, list):
        return "; ".join(_pydantic_error(e) for e in detail) or "invalid request"
    if isinstance(detail, dict):
        message = detail_text(detail.get("message") or "")
        errors = detail.get("errors")
        if isinstance(errors, dict) and errors:
            fields = [
                f"{name or '(arguments)'}: {detail_text(text)}" for name, text in errors.items()
            ]
            if message and all(f in message for f in fields):
                return message  # the server's message already names each field
            return f"{message or 'invalid arguments'}: {'; '.join(fields)}"
        if message:
            return message
    return " ".join(str(detail).split())


def _pydantic_error(e: Any) -> str:
    if not isinstance(e, dict):
        return detail_text(e)
    loc = [str(p) for p in e.get("loc") or []]
    # "body", "query", "path" say where FastAPI looked; the rest names the field.
    where = ".".join(loc[1:] if loc and loc[0] in {"body", "query", "path"} else loc)
    msg = " ".join(str(e.get("msg") or "invalid").split())
    return f"{where}: {msg}" if where else msg


def connect(url: str | None, token: str | None, *, agent: bool = False) -> Api:
    """The server from --url / PIZZABOT_URL, its token from --token / PIZZABOT_API_TOKEN /
    the data folder's api-token file (the server's own, when both run on one machine). For
    the commands an agent runs (`agent`), PIZZABOT_AGENT_TOKEN comes before the last two: an
    agent's own token kept apart from the variable the server reads as its own."""
    base = (url or os.environ.get("PIZZABOT_URL") or DEFAULT_URL).rstrip("/")
    if not base.startswith(("http://", "https://")):
        raise CliError(f"--url must start with http:// or https:// (got {base!r}).", code=2)
    if token:
        return Api(base, token, "from --token")
    if agent and (own := os.environ.get("PIZZABOT_AGENT_TOKEN")):
        return Api(base, own, "from PIZZABOT_AGENT_TOKEN")
    if env := os.environ.get("PIZZABOT_API_TOKEN"):
        return Api(base, env, "from PIZZABOT_API_TOKEN")
    path = _data_dir() / "api-token"
    try:
        kept = path.read_text().strip()
    except OSError:
        kept = ""
    if kept:
        return Api(base, kept, f"read from {path}", from_file=True)
    raise CliError(
        f"No API token: pass --token, set PIZZABOT_API_TOKEN, or run the CLI where the server "
        f"keeps it ({path}; PIZZABOT_DATA_DIR names another data folder).",
        code=2,
    )
