"""A real mail peer on loopback: dovecot (IMAP + LMTP) behind an aiosmtpd SMTP front.

The email channel speaks SMTP out and IMAP in. Measuring or testing it against a fake IMAP
server would only exercise our idea of IMAP, so `pizzabot bench` (its channels part) and the
tests both talk to a real dovecot that this module starts as a child process with a
throw-away config and mailboxes under a temp dir. It ships with the bench, which needs it
outside the test tree; the tests re-export it from `tests.peers.mailserver`.

    SMTP client --smtp--> aiosmtpd front (thread) --lmtp--> dovecot --imap--> IMAP client

Mail is routed by the recipient's local part (the domain is ignored); dovecot itself maps
plus-addresses (``bot+token@example.test``) to user ``bot`` via ``recipient_delimiter``,
and records the envelope recipient in a ``Delivered-To:`` header. The SMTP front hands each
message to dovecot within the DATA exchange: once the front has answered DATA, the message
is in the mailbox.

While dovecot is stopped (``stop_imap``) the SMTP front keeps accepting mail and queues it
in memory, as a real MTA would queue for an unreachable mailbox server; ``start_imap``
delivers the queue in order. This is the honest picture of "IMAP down, mail still
arriving": nothing reaches the mailbox until the mailbox server is back.

With ``certificates=`` the peer looks like a provider's submission and mailbox servers:
dovecot offers STARTTLS on the IMAP port and implicit TLS on ``imaps_port``, and the SMTP
front offers STARTTLS and requires AUTH (PLAIN/LOGIN with the users' passwords) after it.
With ``oauth=`` (a token provider) both also accept XOAUTH2: dovecot through its ``oauth2``
passdb, which asks the provider's introspection endpoint about each token, and the SMTP front
by asking the provider directly.

Needs ``/usr/sbin/dovecot`` (``.ci/install-system-packages`` installs it) and aiosmtpd (the
``bench`` extra).
"""

from __future__ import annotations

import asyncio
import atexit
import base64
import binascii
import contextlib
import email
import email.policy
import grp
import json
import os
import pwd
import shutil
import signal
import smtplib
import socket
import ssl
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from email.message import EmailMessage
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol, Self

import aioimaplib
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import SMTP, AuthResult, Envelope, LoginPassword, Session

DOVECOT = "/usr/sbin/dovecot"
DOMAIN = "example.test"
DEFAULT_USERS: Mapping[str, str] = {"bot": "bot-pw", "alice": "alice-pw", "mallory": "mallory-pw"}

# Generous for a shared 2-core machine, yet short enough that a wrong setup fails instead
# of hanging (aioimaplib waits out its whole timeout when dovecot cannot open a mailbox).
_START_TIMEOUT = 10.0
_IMAP_TIMEOUT = 10.0
_GREETING_TIMEOUT = 30.0
_PORT_TRIES = 5  # fresh ports to try when one picked was taken before it was bound


class MailPeerError(Exception):
    """The mail peer could not start, or refused a request (e.g. a bad login)."""


class ServerCertificates(Protocol):
    """A server certificate and key, for the peer's TLS ports."""

    @property
    def cert_file(self) -> Path: ...

    @property
    def key_file(self) -> Path: ...

    def server_context(self) -> ssl.SSLContext: ...


class TokenProvider(Protocol):
    """An OAuth provider both servers ask about XOAUTH2 tokens."""

    @property
    def introspection_url(self) -> str: ...

    def check_token(self, token: str) -> str | None:
        """The address the token was issued to, or None for a token it does not know."""
        ...


def free_port() -> int:
    """Return a loopback port that was free a moment ago.

    dovecot and aiosmtpd's Controller both need a concrete port up front, so binding to
    port 0 inside them is not an option; the small race is acceptable on loopback.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def free_ports(n: int) -> list[int]:
    """`n` different loopback ports that were free a moment ago: held open together while
    they are picked, since a port just closed can be handed out again at once."""
    with contextlib.ExitStack() as held:
        socks = [
            held.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) for _ in range(n)
        ]
        for sock in socks:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in socks]


def mailbox_user(address: str, delimiter: str = "+") -> str:
    """Map an address to the dovecot user it is delivered to: local part, detail dropped."""
    local = address.strip("<>").rpartition("@")[0] or address.strip("<>")
    return local.split(delimiter, 1)[0]


def fetch_bodies(response: aioimaplib.Response) -> list[bytes]:
    """Pull the raw messages out of an aioimaplib FETCH response.

    aioimaplib returns each ``BODY[]`` literal as a ``bytearray`` item in ``lines``, right
    after the ``b'<n> FETCH (... BODY[] {size}'`` line; everything else there is ``bytes``.
    """
    return [bytes(item) for item in response.lines if isinstance(item, bytearray)]


@dataclass(frozen=True)
class _Pending:
    mail_from: str
    rcpt_tos: list[str]
    content: bytes


class _LmtpRelay:
    """aiosmtpd handler: hand each accepted message to dovecot over LMTP, or queue it.

    Handler hooks run on the Controller's own thread and loop; ``go_online`` runs on a
    worker thread of the caller's loop, hence the threading lock around the queue.
    """

    def __init__(
        self,
        *,
        host: str,
        lmtp_port: int,
        users: set[str],
        passwords: Mapping[str, str] | None = None,
        oauth: TokenProvider | None = None,
    ) -> None:
        self._host = host
        self.lmtp_port = lmtp_port
        self._users = users
        self._passwords: Mapping[str, str] = passwords or {}
        self._oauth = oauth
        #: Users who logged in to the SMTP front with XOAUTH2, in order (tests assert on it).
        self.xoauth2_logins: list[str] = []
        self._lock = threading.Lock()
        self._pending: list[_Pending] = []
        self._online = False

    @property
    def queued(self) -> int:
        with self._lock:
            return len(self._pending)

    def add_user(self, name: str) -> None:
        with self._lock:
            self._users.add(name)

    def set_offline(self) -> None:
        # Taking the lock waits out a delivery in progress, so dovecot is not stopped
        # in the middle of one.
        with self._lock:
            self._online = False

    def go_online(self) -> None:
        """Deliver what was queued, in order, then deliver new mail directly again."""
        with self._lock:
            while self._pending:
                message = self._pending[0]
                remaining = self._deliver(message)
                if remaining:
                    self._pending[0] = _Pending(message.mail_from, remaining, message.content)
                    raise MailPeerError("dovecot refused LMTP connections after start")
                self._pending.pop(0)
            self._online = True

    async def auth_XOAUTH2(self, server: SMTP, args: list[str]) -> AuthResult:
        """SASL XOAUTH2 as Gmail and Outlook speak it (aiosmtpd finds ``auth_<MECH>``).

        A refused token gets a 334 challenge with a JSON error, and the client's empty
        answer, before the 535: that is the exchange real clients must handle.
        """
        # handled=False: aiosmtpd then answers 535 (or `message`); True means "already said".
        if self._oauth is None:
            return AuthResult(success=False, handled=False)
        if len(args) == 2:
            try:
                blob = base64.b64decode(args[1], validate=True)
            except binascii.Error:
                return AuthResult(
                    success=False, handled=False, message="501 5.5.2 Can't decode base64"
                )
        else:
            answer = await server.challenge_auth("")
            if not isinstance(answer, bytes):
                return AuthResult(success=False, handled=True)
            blob = answer
        fields = dict(
            part.split("=", 1)
            for part in blob.decode(errors="replace").split("\x01")
            if "=" in part
        )
        user = fields.get("user", "")
        auth = fields.get("auth", "")
        token = auth[len("Bearer ") :] if auth.startswith("Bearer ") else ""
        owner = await asyncio.to_thread(self._oauth.check_token, token) if token else None
        if owner is None or owner.lower() != user.lower():
            error = {"status": "401", "schemes": "Bearer", "scope": "mail"}
            await server.challenge_auth(json.dumps(error))
            return AuthResult(success=False, handled=False)
        self.xoauth2_logins.append(user)
        return AuthResult(success=True, auth_data=user)

    def authenticate(
        self,
        server: SMTP,
        session: Session,
        envelope: Envelope,
        mechanism: str,
        auth_data: object,
    ) -> AuthResult:
        """AUTH PLAIN / LOGIN with a mailbox user's password (the TLS front's authenticator)."""
        if not isinstance(auth_data, LoginPassword):
            return AuthResult(success=False, handled=False)
        password = self._passwords.get(mailbox_user(auth_data.login.decode(errors="replace")))
        ok = password is not None and auth_data.password.decode(errors="replace") == password
        return AuthResult(success=ok, handled=False)

    async def handle_RCPT(
        self,
        server: SMTP,
        session: Session,
        envelope: Envelope,
        address: str,
        rcpt_options: list[str],
    ) -> str:
        # Checked here rather than by dovecot so unknown users are refused at RCPT time
        # even while dovecot is down, like a real MTA with a recipient table.
        if mailbox_user(address) not in self._users:
            return "550 5.1.1 No such user here"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server: SMTP, session: Session, envelope: Envelope) -> str:
        content = envelope.original_content
        if content is None or envelope.mail_from is None:
            return "554 5.5.1 No message"
        message = _Pending(envelope.mail_from, list(envelope.rcpt_tos), content)
        with self._lock:
            # Once something is queued, later mail queues behind it to keep the order.
            if not self._online or self._pending:
                self._pending.append(message)
                return "250 2.0.0 Queued: mailbox server is down"
            try:
                remaining = self._deliver(message)
            except smtplib.SMTPRecipientsRefused as exc:
                code, reason = next(iter(exc.recipients.values()))
                return f"{code} {reason.decode(errors='replace')}"
            except smtplib.SMTPResponseException as exc:
                error = exc.smtp_error
                text = error.decode(errors="replace") if isinstance(error, bytes) else error
                return f"{exc.smtp_code} {text}"
            if remaining:
                self._pending.append(_Pending(message.mail_from, remaining, content))
                return "250 2.0.0 Queued: mailbox server is down"
        return "250 2.0.0 Delivered"

    def _deliver(self, message: _Pending) -> list[str]:
        """Deliver to each recipient; return those left undelivered because LMTP is down."""
        try:
            lmtp = smtplib.LMTP(self._host, self.lmtp_port, timeout=_START_TIMEOUT)
        except OSError:
            return list(message.rcpt_tos)
        with lmtp:
            for index, rcpt in enumerate(message.rcpt_tos):
                # One transaction per recipient: LMTP answers DATA once per recipient and
                # smtplib reads only one reply, which would desync a shared transaction.
                try:
                    lmtp.sendmail(message.mail_from, [rcpt], message.content)
                except smtplib.SMTPServerDisconnected:
                    return list(message.rcpt_tos[index:])
                except smtplib.SMTPException:
                    # A refusal from a running dovecot; SMTPException subclasses OSError,
                    # so it must not fall through to the "dovecot is down" case below.
                    raise
                except OSError:
                    return list(message.rcpt_tos[index:])
        return []


class MailServer:
    """dovecot + an SMTP front on loopback, with users from ``users`` (name -> password).

    Use as ``with MailServer() as mail:`` or ``async with MailServer() as mail:``. Then send
    with any SMTP client to ``mail.host:mail.smtp_port`` (no TLS, no auth) and read with
    IMAP at ``mail.host:mail.imap_port`` (plain LOGIN, no TLS).

    ``certificates``: makes the server certificate in the folder it is given at start; then
    STARTTLS on both ports, implicit TLS IMAP on ``imaps_port``, SMTP AUTH required.
    ``oauth=``: XOAUTH2 on both, checked against that provider (see the module docstring).
    """

    host = "127.0.0.1"

    def __init__(
        self,
        *,
        users: Mapping[str, str] = DEFAULT_USERS,
        domain: str = DOMAIN,
        dovecot: str = DOVECOT,
        certificates: Callable[[Path], ServerCertificates] | None = None,
        oauth: TokenProvider | None = None,
    ) -> None:
        self.domain = domain
        self.users: dict[str, str] = dict(users)
        self._dovecot = dovecot
        self._make_certificates = certificates
        self.tls = certificates is not None
        self.oauth = oauth
        self._pick_ports()
        self._certs: ServerCertificates | None = None
        self._dir: Path | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._controller: Controller | None = None
        self._relay = _LmtpRelay(
            host=self.host,
            lmtp_port=self.lmtp_port,
            users=set(self.users),
            passwords=self.users,
            oauth=oauth,
        )

    # ----- addresses and state -----------------------------------------------------------

    def address(self, user: str, tag: str | None = None) -> str:
        """``user@domain``, or the plus-address ``user+tag@domain``."""
        local = user if tag is None else f"{user}+{tag}"
        return f"{local}@{self.domain}"

    @property
    def queued(self) -> int:
        """Messages accepted over SMTP but waiting for dovecot to come back."""
        return self._relay.queued

    @property
    def imap_running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def dovecot_pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def certs(self) -> ServerCertificates:
        """The server certificate of a server started with ``certificates``."""
        if self._certs is None:
            raise MailPeerError("mail server was not started with certificates")
        return self._certs

    @property
    def smtp_xoauth2_logins(self) -> list[str]:
        """Users who authenticated to the SMTP front with XOAUTH2, in order."""
        return list(self._relay.xoauth2_logins)

    def imap_logins(self) -> list[str]:
        """dovecot's log lines for successful IMAP logins (they name the method and TLS)."""
        path = self.root / "dovecot.log"
        text = path.read_text(errors="replace") if path.exists() else ""
        return [line for line in text.splitlines() if "imap-login: Info: Login:" in line]

    @property
    def root(self) -> Path:
        """The temp dir holding config, logs and mailboxes (for a look after a failure)."""
        if self._dir is None:
            raise MailPeerError("mail server is not started")
        return self._dir

    # ----- lifecycle ---------------------------------------------------------------------

    def start(self) -> None:
        if not os.access(self._dovecot, os.X_OK):
            raise MailPeerError(f"{self._dovecot} not found: run .ci/install-system-packages")
        self._dir = Path(tempfile.mkdtemp(prefix="pizzabot-mail-"))
        # dovecot's unprivileged processes (login, auth, mail) must reach files in here.
        self._dir.chmod(0o755)
        try:
            if self._make_certificates is not None:
                self._certs = self._make_certificates(self._dir / "tls")
            self._write_config()
            for user in self.users:
                self._make_home(user)
            self._listen()
        except BaseException:
            self.stop()
            raise
        atexit.register(self.stop)

    def stop(self) -> None:
        """Stop SMTP and dovecot and delete the mailboxes. Safe to call twice."""
        atexit.unregister(self.stop)
        if self._controller is not None:
            self._controller.stop()
            self._controller = None
        self._relay.set_offline()
        self._stop_dovecot()
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def _pick_ports(self) -> None:
        self.imap_port, imaps, self.lmtp_port, self.smtp_port = free_ports(4)
        self.imaps_port = imaps if self.tls else 0

    def _listen(self) -> None:
        """Start dovecot and the SMTP front, on fresh ports if one was taken meanwhile.

        A port free_port picked can be taken before dovecot or aiosmtpd binds it: an
        outgoing connection's local port comes from the same range, and other test workers
        connect all the time.
        """
        for attempt in range(1, _PORT_TRIES + 1):
            try:
                self._start_dovecot()
                self._relay.go_online()
                self._controller = self._smtp_front()
                self._controller.start()
                return
            except (MailPeerError, OSError) as error:
                if attempt == _PORT_TRIES or "address already in use" not in str(error).lower():
                    raise
            self._controller = None
            self._relay.set_offline()
            self._stop_dovecot()
            self._pick_ports()
            self._relay.lmtp_port = self.lmtp_port
            self._write_config()

    def _smtp_front(self) -> Controller:
        if not self.tls:
            return Controller(self._relay, hostname=self.host, port=self.smtp_port)
        # A submission port: STARTTLS offered, AUTH only after it, no mail without AUTH.
        return Controller(
            self._relay,
            hostname=self.host,
            port=self.smtp_port,
            server_hostname=self.host,
            tls_context=self.certs.server_context(),
            require_starttls=True,
            auth_required=True,
            auth_require_tls=True,
            authenticator=self._relay.authenticate,
        )

    def add_user(self, name: str, password: str) -> None:
        """Create a mailbox user; dovecot re-reads the passwd file on its next lookup."""
        self.users[name] = password
        self._relay.add_user(name)
        if self._dir is not None:
            self._write_passwd()
            self._make_home(name)

    async def stop_imap(self) -> None:
        """Stop dovecot (IMAP and LMTP) but keep the mailboxes; SMTP keeps accepting."""
        self._relay.set_offline()
        await asyncio.to_thread(self._stop_dovecot)

    async def start_imap(self) -> None:
        """Start dovecot again on the same ports and deliver the mail queued meanwhile."""
        await asyncio.to_thread(self._start_dovecot)
        await asyncio.to_thread(self._relay.go_online)

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    async def __aenter__(self) -> Self:
        await asyncio.to_thread(self.start)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await asyncio.to_thread(self.stop)

    # ----- reading mail (for assertions) -------------------------------------------------

    async def connect_imap(self, user: str, password: str) -> aioimaplib.IMAP4:
        """A logged-in aioimaplib client (INBOX not selected yet). Caller logs out."""
        client = aioimaplib.IMAP4(host=self.host, port=self.imap_port, timeout=_IMAP_TIMEOUT)
        await client.wait_hello_from_server()
        response = await client.login(user, password)
        if response.result != "OK":
            with contextlib.suppress(Exception):
                await client.logout()
            raise MailPeerError(f"IMAP login as {user!r} refused: {response.lines!r}")
        return client

    async def knows(self, user: str, password: str) -> bool:
        """Whether dovecot lets `user` log in: it reads a changed passwd file again at most
        once a second, so a user just added is known a moment later."""
        try:
            client = await self.connect_imap(user, password)
        except MailPeerError:
            return False
        with contextlib.suppress(Exception):
            await client.logout()
        return True

    async def fetch_all(
        self, user: str, password: str, mailbox: str = "INBOX"
    ) -> list[EmailMessage]:
        """Every message in ``mailbox``, oldest first, without marking any as seen."""
        client = await self.connect_imap(user, password)
        try:
            selected = await client.select(mailbox)
            if selected.result != "OK":
                raise MailPeerError(f"SELECT {mailbox} failed: {selected.lines!r}")
            # UID FETCH on an empty range answers OK with nothing; plain FETCH 1:* is BAD.
            response = await client.uid("fetch", "1:*", "(UID BODY.PEEK[])")
            if response.result != "OK":
                raise MailPeerError(f"FETCH failed: {response.lines!r}")
        finally:
            with contextlib.suppress(Exception):
                await client.logout()
        return [_parse(raw) for raw in fetch_bodies(response)]

    # ----- dovecot -----------------------------------------------------------------------

    def _ids(self) -> tuple[int, int, str, str, str]:
        """(mail uid, mail gid, login user, internal user, internal group)."""
        if os.geteuid() != 0:
            me = pwd.getpwuid(os.geteuid())
            return me.pw_uid, me.pw_gid, me.pw_name, me.pw_name, _group_name(me.pw_gid)
        # dovecot refuses uid 0 for mail access, so as root mail is owned by nobody.
        try:
            nobody = pwd.getpwnam("nobody")
            pwd.getpwnam("dovenull")
            pwd.getpwnam("dovecot")
        except KeyError as exc:
            raise MailPeerError(f"system user missing ({exc}); is dovecot-core installed?") from exc
        return nobody.pw_uid, nobody.pw_gid, "dovenull", "dovecot", "dovecot"

    def _write_passwd(self) -> None:
        lines = "".join(f"{name}:{{PLAIN}}{pw}::::::\n" for name, pw in self.users.items())
        path = self.root / "passwd"
        path.write_text(lines)
        path.chmod(0o644)

    def _make_home(self, user: str) -> None:
        uid, gid, *_ = self._ids()
        home = self.root / "home" / user
        home.mkdir(parents=True, exist_ok=True)
        os.chown(home, uid, gid)
        home.chmod(0o700)

    def _write_config(self) -> None:
        root = self.root
        uid, gid, login_user, internal_user, internal_group = self._ids()
        for sub in ("run", "state", "home"):
            (root / sub).mkdir(mode=0o755, exist_ok=True)
        self._write_passwd()
        if self.tls:
            certs = self.certs
            ssl = f"ssl = yes\nssl_cert = <{certs.cert_file}\nssl_key = <{certs.key_file}\n"
        else:
            ssl = "ssl = no\n"
        mechanisms = "plain login"
        oauth_passdb = ""
        if self.oauth is not None:
            mechanisms += " xoauth2 oauthbearer"
            (root / "oauth2.conf").write_text(
                f"""\
introspection_mode = post
introspection_url = {self.oauth.introspection_url}
username_attribute = email
active_attribute = active
active_value = true
force_introspection = yes
"""
            )
            # Only the token mechanisms reach this passdb, and they reach only it: a token
            # is never compared with a password, nor a password sent to the provider.
            oauth_passdb = f"""\
passdb {{
  driver = oauth2
  mechanisms = xoauth2 oauthbearer
  args = {root}/oauth2.conf
}}
"""
        (root / "dovecot.conf").write_text(
            f"""\
protocols = imap lmtp
listen = {self.host}
base_dir = {root}/run
state_dir = {root}/state
log_path = {root}/dovecot.log
{ssl}disable_plaintext_auth = no
auth_failure_delay = 0
auth_mechanisms = {mechanisms}
default_login_user = {login_user}
default_internal_user = {internal_user}
default_internal_group = {internal_group}
first_valid_uid = {uid}
# Both are dovecot's defaults; stated because the bot's plus-address tokens rely on them.
recipient_delimiter = +
lmtp_save_to_detail_mailbox = no
mail_location = maildir:~/Maildir
passdb {{
  driver = passwd-file
  # "none": lookups that authenticate nobody (LMTP's user lookup) use it too.
  mechanisms = plain login none
  # %n: the local part, so "bot", "bot@example.test" and (after dovecot drops the
  # +detail) "bot+token@example.test" are all user bot.
  args = scheme=PLAIN username_format=%n {root}/passwd
}}
{oauth_passdb}userdb {{
  driver = static
  args = uid={uid} gid={gid} home={root}/home/%n
}}
service imap-login {{
  chroot =
  inet_listener imap {{
    address = {self.host}
    port = {self.imap_port}
  }}
  inet_listener imaps {{
    address = {self.host}
    port = {self.imaps_port}
    ssl = yes
  }}
}}
service anvil {{
  chroot =
  # Without the socket auth cannot reach anvil and skips the failed-login penalty, which
  # would otherwise delay every login from 127.0.0.1 by 2-15 s after one wrong password.
  unix_listener anvil-auth-penalty {{
    mode = 0
  }}
}}
service lmtp {{
  inet_listener lmtp {{
    address = {self.host}
    port = {self.lmtp_port}
  }}
}}
protocol lmtp {{
  postmaster_address = postmaster@{self.domain}
}}
"""
        )

    def _start_dovecot(self) -> None:
        if self.imap_running:
            return
        root = self.root
        with (root / "dovecot.stderr").open("ab") as err:
            self._proc = subprocess.Popen(
                [self._dovecot, "-F", "-c", str(root / "dovecot.conf")],
                stdin=subprocess.DEVNULL,
                stdout=err,
                stderr=err,
            )
        proc = self._proc
        # Blocking: start() runs in sync fixtures and worker threads, not on an event loop.
        deadline = time.monotonic() + _GREETING_TIMEOUT
        while not (
            _greets(self.host, self.imap_port, b"* OK")
            and _greets(self.host, self.lmtp_port, b"220")
        ):
            if proc.poll() is not None:
                raise MailPeerError(f"dovecot exited at start:\n{self._logs()}")
            if time.monotonic() > deadline:
                raise MailPeerError(
                    f"dovecot did not greet on IMAP {self.imap_port} and LMTP {self.lmtp_port} "
                    f"within {_GREETING_TIMEOUT:g} s:\n{self._logs()}"
                )
            time.sleep(0.02)

    def _stop_dovecot(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        # The master stops its children (imap, lmtp, auth, ...) before it exits itself.
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=_START_TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def _logs(self) -> str:
        parts = []
        for name in ("dovecot.stderr", "dovecot.log"):
            path = self.root / name
            if path.exists():
                parts.append(path.read_text(errors="replace")[-4000:])
        return "\n".join(parts)


def _greets(host: str, port: int, greeting: bytes) -> bool:
    """True once a server on ``port`` accepts a connection and sends its greeting."""
    try:
        with socket.create_connection((host, port), timeout=1.0) as sock:
            return sock.recv(64).startswith(greeting)
    except OSError:
        return False


def _group_name(gid: int) -> str:
    return grp.getgrgid(gid).gr_name


def _parse(raw: bytes) -> EmailMessage:
    message: Any = email.message_from_bytes(raw, policy=email.policy.default)
    assert isinstance(message, EmailMessage)
    return message
