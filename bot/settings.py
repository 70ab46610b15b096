"""Settings: the one place Pizza Bot reads its environment (prefix `PIZZABOT_`).

Every other package takes what it needs as keyword arguments from `pizzabot.bot.server`.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from pizzabot.agent.skills import Budget, DailyBudget

DEFAULT_SKILLS = Path(__file__).resolve().parent.parent / "manifests" / "skills"

log = logging.getLogger(__name__)


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="PIZZABOT_", extra="ignore")

    host: str = "127.0.0.1"
    port: int = 8787
    data_dir: Path = Field(default_factory=lambda: Path.home() / ".local" / "share" / "pizzabot")
    database_url: str | None = None
    api_token: SecretStr | None = None
    skills_dir: Path = DEFAULT_SKILLS
    skills_watch: float = 2.0  # seconds between looks for changed skill files; 0: --reload only
    public_url: str | None = (
        None  # the web page's address as others reach it (links in Slack, email)
    )

    worker: bool = True
    worker_concurrency: int = 8
    poll_interval: float = 2.0
    lease_seconds: float = 30.0

    # The outbox (agent/outbox.py): what one delivery may cost, and when it is given up
    outbox_attempt_timeout: float = Field(default=30.0, gt=0)  # seconds per attempt, in all
    outbox_concurrency: int = Field(default=4, ge=1)  # runs' deliveries at once, per channel
    outbox_max_attempts: int = Field(default=12, ge=1)  # failed in a row, then a dead letter
    outbox_backoff_base: float = Field(default=1.0, gt=0)  # first retry's delay, doubled ...
    outbox_backoff_max: float = Field(default=300.0, gt=0)  # ... up to this many seconds
    outbox_retry_after_max: float = Field(default=600.0, ge=0)  # longest Retry-After honoured

    model_attempts: int = 4
    model_timeout: float = 120.0
    tool_timeout: float = 600.0

    # Control: server-wide budget defaults, used where a skill sets none (issue: control).
    budget_tokens: int | None = None
    budget_cost_usd: float | None = None
    budget_steps: int | None = 100  # a runaway loop pauses for a human instead of burning money
    budget_wall_time: str | None = None
    budget_day_tokens: int | None = None
    budget_day_cost_usd: float | None = None
    otel: bool = True  # export traces when OTEL_EXPORTER_OTLP_ENDPOINT is set

    # HTTP limits (channels/http/guard.py, bot/listen.py)
    max_body_bytes: int = 1024 * 1024  # every request body but webhooks' (webhook_max_bytes)
    body_timeout: float = 30.0  # seconds a request body may take to arrive (else 408)
    header_timeout: float = 10.0  # seconds a connection may take to send a request's headers
    keepalive_timeout: int = 5  # seconds an idle kept-alive connection stays open
    max_connections: int = 1000  # connections and requests at once; more are answered 503
    trusted_proxies: str = ""  # addresses/networks whose X-Forwarded-For/-Proto count (none)

    log_json: bool = False
    log_level: str = "INFO"

    # Slack (issue: Slack channel)
    slack_bot_token: SecretStr | None = None
    slack_app_token: SecretStr | None = None
    slack_signing_secret: SecretStr | None = None
    slack_mode: Literal["socket", "http"] = "socket"  # socket needs the app token (xapp-)
    slack_api_url: str | None = None  # tests point the Web API at a local recorder
    slack_default_skill: str | None = None

    # Telegram (bot/wire_chats.py, docs/telegram.md): on when the bot token is set
    telegram_bot_token: SecretStr | None = None  # from @BotFather: 123456:ABC…
    telegram_mode: Literal["polling", "webhook"] = "polling"  # webhook needs public_url
    telegram_webhook_secret: SecretStr | None = None  # X-Telegram-Bot-Api-Secret-Token
    telegram_api_url: str = "https://api.telegram.org"  # tests point it at a local recorder
    telegram_default_skill: str | None = None
    telegram_poll_timeout: float = Field(default=30.0, gt=0)  # seconds one long poll waits

    # Discord (bot/wire_chats.py, docs/discord.md): on when all three are set
    discord_application_id: str | None = None
    discord_public_key: str | None = None  # the app's Ed25519 key (hex), checks interactions
    discord_bot_token: SecretStr | None = None
    discord_api_url: str = "https://discord.com/api/v10"  # tests point it at a recorder
    discord_default_skill: str | None = None

    # Microsoft Teams through the Bot Framework (bot/wire_chats.py, docs/teams.md): on when
    # the app id and its client secret are set
    teams_app_id: str | None = None  # the bot's Microsoft App ID: the audience of its tokens
    teams_app_password: SecretStr | None = None  # the app's client secret
    teams_tenant_id: str | None = None  # a single-tenant app's tenant (default: multi-tenant)
    # Where cards go for a conversation the bot has not heard from since it started
    teams_service_url: str = "https://smba.trafficmanager.net/teams/"
    # The Bot Framework's OpenID configuration (its signing keys) and token endpoint; tests
    # point both at local peers
    teams_openid_url: str = "https://login.botframework.com/v1/.well-known/openidconfiguration"
    teams_token_url: str | None = None  # default: the tenant's (or botframework.com's) v2.0
    teams_default_skill: str | None = None

    # Email (bot/wire_email.py): on when email_from and smtp_host are set; replies need imap_host
    email_from: str | None = None  # the bot's address, e.g. pizzabot@example.com
    email_from_name: str = "Pizza Bot"
    email_plus_address: bool = True  # replies go to bot+<item token>@…
    smtp_host: str | None = None
    smtp_port: int = 587
    smtp_tls: Literal["starttls", "tls", "none"] = "starttls"
    smtp_user: str | None = None
    smtp_password: SecretStr | None = None
    smtp_auth: Literal["password", "xoauth2"] = "password"  # xoauth2: the oauth_* settings
    smtp_timeout: float = 30.0
    imap_host: str | None = None
    imap_port: int = 993
    # tls: implicit TLS (993); starttls: port 143 upgraded; none only for a server on localhost
    imap_tls: Literal["tls", "starttls", "none"] = "tls"
    imap_user: str | None = None
    imap_password: SecretStr | None = None
    imap_auth: Literal["password", "xoauth2"] = "password"  # xoauth2: the oauth_* settings
    # OAuth client for XOAUTH2 (docs/email.md: Google and Microsoft set-up): refresh-token flow
    oauth_provider: Literal["google", "microsoft", "custom"] | None = None
    oauth_client_id: str | None = None
    oauth_client_secret: SecretStr | None = None
    oauth_refresh_token: SecretStr | None = None
    oauth_tenant: str | None = None  # microsoft: the Directory (tenant) ID or domain
    oauth_token_url: str | None = None  # default: the provider's
    oauth_scope: str | None = None  # default: the provider's mail scopes
    imap_folder: str = "INBOX"
    imap_idle_refresh: float = 300.0  # seconds before IDLE is renewed (and the box re-read)
    imap_poll_interval: float = 60.0  # only for servers without IDLE
    imap_backoff_max: float = 60.0  # longest wait between reconnects
    # Who may start runs by mailing the bot: comma-separated or a JSON list.
    email_allowed_senders: Annotated[list[str], NoDecode] = []
    email_default_skill: str | None = None
    # Which mail is believed to come from its From (docs/email.md, "Who can decide by mail"):
    # authenticated: only with a passing aligned DMARC/DKIM/SPF verdict in the topmost
    # Authentication-Results from email_authserv_id (unset: no mail decides or starts runs);
    # mailbox: every mail not marked forged, for a server that rejects spoofed mail itself.
    email_trust: Literal["authenticated", "mailbox"] = "authenticated"
    email_authserv_id: str | None = None  # the receiving server's authserv-id, e.g. mx.corp.com
    email_max_bytes: int = 5_000_000  # larger mails are refused unread
    email_link_ttl: float = 86400  # seconds a decision link in a mail works
    # Signs decision links and reply tokens; unset: a random key kept in data_dir/mail-key.
    # Every server process of one deployment needs the same key.
    email_key: SecretStr | None = None
    # Signs the audit chain's checkpoints (docs/audit.md); unset: data_dir/audit-key, made at
    # the first start. Every server of one deployment needs the same file.
    audit_key_file: Path | None = None
    audit_checkpoint_every: float = Field(default=3600.0, gt=0)  # seconds between checkpoints

    @field_validator("imap_tls", mode="before")
    @classmethod
    def _imap_tls(cls, value: object) -> object:
        # true / false (the setting's older form) still mean implicit TLS / none.
        if isinstance(value, bool):
            return "tls" if value else "none"
        if isinstance(value, str):
            text = value.strip().lower()
            old = {"true": "tls", "1": "tls", "yes": "tls", "on": "tls"}
            old |= {"false": "none", "0": "none", "no": "none", "off": "none"}
            return old.get(text, text)
        return value

    @field_validator("email_authserv_id", mode="before")
    @classmethod
    def _authserv_id(cls, value: object) -> object:
        # Compared with the header's first word, lower-cased; blank means unset.
        if isinstance(value, str):
            return value.strip().lower() or None
        return value

    @field_validator("email_allowed_senders", mode="before")
    @classmethod
    def _senders(cls, value: object) -> object:
        if isinstance(value, str):
            text = value.strip()
            items = json.loads(text) if text.startswith("[") else text.split(",")
            return [str(a).strip().lower() for a in items if str(a).strip()]
        if isinstance(value, list):
            return [str(a).strip().lower() for a in value]
        return value

    # Triggers: schedules, webhooks, approval time-outs (bot/wire_triggers.py)
    scheduler: bool = True  # fire schedules from this process (safe on many servers)
    schedule_sync_interval: float = 30.0  # seconds between re-reading schedules from the database
    schedule_misfire_grace: float = 60.0  # a fire later than this is a misfire (skip | run_once)
    webhook_max_bytes: int = 1024 * 1024
    webhook_tolerance: float = 300.0  # seconds a webhook's X-Pizzabot-Timestamp may be off
    timers_interval: float = 30.0  # seconds between checks for approval time-outs and reminders
    # The daily digest (bot/wire_digest.py) for skills that set no `digest:` of their own
    digest_at: str | None = Field(default=None, pattern=r"^([01][0-9]|2[0-3]):[0-5][0-9]$")
    digest_timezone: str = "UTC"
    digest_interval: float = 60.0  # seconds between checks whether a digest is due
    # The MCP server (/mcp and `pizzabot mcp`): the inbox-only skill its requests go to
    mcp_skill: str = "approvals"
    # A2A (/a2a; the `a2a` extra): the inbox-only skill its messages ask in; empty: not served
    a2a_skill: str = ""

    # Web inbox (bot/wire_web.py): failed logins per client address before it must wait (429)
    web_login_max_failures: int = 10
    web_login_window: float = 300.0  # seconds over which failures count, and the wait after

    # The phone (bot/wire_phone.py): Web Push to subscribed browsers, passkeys, step-up
    push: bool = True  # send a push for each card that waits to the browsers people subscribe
    push_contact: str | None = None  # VAPID "sub": a mailto: or https: address; default: public URL
    push_loopback: bool = False  # accept push services over plain http on loopback (tests)
    passkey_rp_id: str | None = None  # the passkeys' host name; default: the public URL's

    @property
    def db_url(self) -> str:
        return self.database_url or f"sqlite+aiosqlite:///{self.data_dir / 'pizzabot.db'}"

    @property
    def audit_key_path(self) -> Path:
        return self.audit_key_file or self.data_dir / "audit-key"

    @property
    def base_url(self) -> str:
        return (self.public_url or f"http://{self.host}:{self.port}").rstrip("/")

    def default_budget(self) -> Budget:
        return Budget(
            tokens=self.budget_tokens,
            cost_usd=self.budget_cost_usd,
            steps=self.budget_steps,
            wall_time=self.budget_wall_time,  # type: ignore[arg-type]  # parsed by the validator
            per_day=DailyBudget(tokens=self.budget_day_tokens, cost_usd=self.budget_day_cost_usd),
        )

    def secret_values(self) -> list[str]:
        """Every secret this server holds in its settings (tokens, passwords, keys): the values
        a log line, a run's error or a delivery's error must never show."""
        values = (getattr(self, name) for name in type(self).model_fields)
        return [v.get_secret_value() for v in values if isinstance(v, SecretStr)]

    def ensure_token(self) -> tuple[str, bool]:
        """The API token: from the environment, else the data folder, else a new one kept there.
        Returns (token, created). Makes the data folder (private) in every case."""
        private_folder(self.data_dir)
        if self.api_token is not None:
            from pizzabot.agent.policy.tokens import PREFIX
            from pizzabot.cli.client import CliError

            if self.api_token.get_secret_value().startswith(PREFIX):  # an agent's as the owner's
                raise CliError(
                    f"PIZZABOT_API_TOKEN holds a named token ({PREFIX}…), not this server's own: "
                    "unset it where the server starts (an agent's token goes to the agent).",
                    code=2,
                )
            return self.api_token.get_secret_value(), False
        path = self.data_dir / "api-token"
        if path.exists():
            return path.read_text().strip(), False
        token = secrets.token_urlsafe(32)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(token + "\n")
        return token, True


def private_folder(path: Path) -> None:
    """Make `path` a folder only its owner can open (0700): it holds the database, the API
    token and the mail key. An existing one open to others is tightened, and the log says so."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    mode = path.stat().st_mode & 0o777
    if mode & 0o077:
        path.chmod(mode & 0o700)
        log.warning(
            "data folder %s was open to other users (mode %03o); made it %03o",
            path,
            mode,
            mode & 0o700,
        )


def environment() -> dict[str, str]:
    """The process environment, for skills' `api_key_env` and MCP servers' inherited env."""
    return dict(os.environ)
