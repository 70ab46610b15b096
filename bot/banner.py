"""What `pizzabot serve` says on its own: a start block, one line when it is ready, one line
when it stops.

The lines go to stderr as plain text, never wrapped or styled, because stderr is as often a
log file, `docker logs` or the journal as it is a terminal, and a wrapped line breaks a
command someone copies from it. The API token is shown only to a person at a terminal; a
log names the file that keeps it instead.
"""

from __future__ import annotations

import contextlib
import shlex
import signal
import sys
from collections.abc import Callable, Generator, Sequence
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any, TextIO

import uvicorn

from pizzabot.bot.settings import Settings

if TYPE_CHECKING:  # the start block is printed before the app's heavy imports are made
    from pizzabot.bot.services import Services

#: Skill names the ready line lists before it says "and N more".
MAX_NAMES = 8


def say(line: str, *, to: TextIO | None = None) -> None:
    out = to or sys.stderr
    out.write(line + "\n")
    out.flush()


def start_block(settings: Settings, *, token: str, created: bool, interactive: bool) -> list[str]:
    """Where the server listens, where its data and token are, how to sign in, and which
    mail the bot believes when it reads a mailbox."""
    base = f"http://{settings.host}:{settings.port}"
    token_file = settings.data_dir / "api-token"
    database = "SQLite" if settings.db_url.startswith("sqlite") else "PostgreSQL"
    if settings.api_token:
        where, export = "from PIZZABOT_API_TOKEN", "use the token from PIZZABOT_API_TOKEN"
    else:
        where = f"kept in {token_file}{' (new)' if created else ''}"
        export = f"export PIZZABOT_API_TOKEN=$(cat {shlex.quote(str(token_file))})"
    if settings.skills_watch > 0:
        reload = f"a changed file is loaded within {settings.skills_watch:g} s"
    else:
        reload = "changes load on `pizzabot skills --reload`"
    if interactive:
        inbox = f"{base}/login?token={token}"
    else:
        inbox = f"{base}/login (sign in with the token)"
    lines = [
        f"Pizza Bot on {base}",
        f"  data:    {settings.data_dir} ({database})",
        f"  token:   {where}",
        f"  inbox:   {inbox}",
        f"  CLI/API: {export}",
        f"  skills:  {settings.skills_dir} ({reload}; `pizzabot skills` shows what loaded)",
    ]
    mail = mail_line(settings)
    return lines if mail is None else [*lines, mail]


def mail_line(settings: Settings) -> str | None:
    """Which mail counts as its sender's, when the bot reads a mailbox (else None)."""
    s = settings
    if not (s.email_from and s.smtp_host and s.imap_host):
        return None
    if s.email_trust == "mailbox":
        return (
            "  mail:    WARNING: mail is believed unless marked forged "
            "(PIZZABOT_EMAIL_TRUST=mailbox); safe only if the mailbox's server rejects "
            "spoofed mail"
        )
    if not s.email_authserv_id:
        return (
            "  mail:    no mail can decide or start runs until PIZZABOT_EMAIL_AUTHSERV_ID "
            "names the receiving server (the first word of its Authentication-Results), "
            "or PIZZABOT_EMAIL_TRUST=mailbox if that server rejects spoofed mail itself"
        )
    return (
        "  mail:    a mail decides or starts a run only with a passing aligned DMARC, DKIM "
        f"or SPF verdict in {s.email_authserv_id}'s results"
    )


def _names(names: Sequence[str]) -> str:
    shown = ", ".join(names[:MAX_NAMES])
    return shown + (f" and {len(names) - MAX_NAMES} more" if len(names) > MAX_NAMES else "")


def ready_line(svc: Services) -> str:
    """One line once everything runs: the skills loaded and refused, the channels, the worker."""
    loaded = [s.name for s in svc.ctx.skills.all()]
    parts = [f"skills {_names(loaded)}" if loaded else "no skills loaded"]
    refused = svc.ctx.skills.refused()
    if refused:
        files = [Path(r.error.path).name for r in refused]
        parts.append(f"refused {_names(files)} (`pizzabot skills` says why)")
    channels = ["web"]
    # Requests' callbacks are always there: not a channel anyone chose.
    for name in sorted(set(svc.dispatcher.channels) - {"callback"}):
        mode = f" ({svc.settings.slack_mode} mode)" if name == "slack" else ""
        channels.append(name + mode)
    parts.append(f"channels {', '.join(channels)}")
    parts.append("worker on" if svc.worker is not None else "no worker (--no-worker)")
    if svc.schema_change:
        parts.append(f"database {svc.schema_change}")
    return "ready: " + "; ".join(parts)


_SIGNALS: dict[int, str] = {signal.SIGINT: "Ctrl-C", signal.SIGTERM: "SIGTERM"}


def stop_line(sig: int | None) -> str:
    why = f" ({_SIGNALS.get(sig, signal.Signals(sig).name)})" if sig is not None else ""
    return f"Pizza Bot stopped{why}; its runs are kept and go on at the next start"


class Server(uvicorn.Server):
    """uvicorn's server, telling `on_stop` which signal stopped it (and `on_exit` it came).

    uvicorn hands a caught signal back to Python once it has shut down (SIGTERM's default
    then ends the process at once), so the stop line is said just before that.
    """

    def __init__(
        self,
        config: uvicorn.Config,
        *,
        on_stop: Callable[[int | None], None],
        on_exit: Callable[[], None] = lambda: None,
    ) -> None:
        super().__init__(config)
        self.stop_signals: list[int] = []
        self._on_stop = on_stop
        self._on_exit = on_exit

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        self.stop_signals.append(sig)
        self._on_exit()
        super().handle_exit(sig, frame)

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        with super().capture_signals():
            try:
                yield
            finally:
                self._on_stop(self.stop_signals[0] if self.stop_signals else None)


def ready_printer(app: Any) -> None:
    """BootApp's `on_ready`: the built app's services say what runs."""
    say(ready_line(app.state.services))
