"""Settings: the one place Pizza Bot reads its environment (prefix `PIZZABOT_`).

Every other package takes what it needs as keyword arguments from `bot.server`.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

DEFAULT_SKILLS = Path(__file__).resolve().parent.parent / "manifests" / "skills"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="PIZZABOT_", extra="ignore")

    host: str = "127.0.0.1"
    port: int = 8787
    data_dir: Path = Field(default_factory=lambda: Path.home() / ".local" / "share" / "pizzabot")
    database_url: str | None = None
    api_token: SecretStr | None = None
    skills_dir: Path = DEFAULT_SKILLS
    public_url: str | None = (
        None  # the web page's address as others reach it (links in Slack, email)
    )

    worker: bool = True
    worker_concurrency: int = 8
    poll_interval: float = 2.0
    lease_seconds: float = 30.0

    model_attempts: int = 4
    model_timeout: float = 120.0
    tool_timeout: float = 600.0

    log_json: bool = False
    log_level: str = "INFO"

    # Slack (issue: Slack channel)
    slack_bot_token: SecretStr | None = None
    slack_app_token: SecretStr | None = None
    slack_signing_secret: SecretStr | None = None
    slack_mode: str = "socket"  # socket | http
    slack_api_url: str | None = None  # tests point the Web API at a local recorder
    slack_default_skill: str | None = None

    # Email
    email_from: str | None = None
    smtp_host: str | None = None
    smtp_port: int = 587
    smtp_tls: str = "starttls"  # starttls | tls | none
    smtp_user: str | None = None
    smtp_password: SecretStr | None = None
    imap_host: str | None = None
    imap_port: int = 993
    imap_tls: bool = True
    imap_user: str | None = None
    imap_password: SecretStr | None = None
    imap_folder: str = "INBOX"
    email_allowed_senders: list[str] = []
    email_default_skill: str | None = None

    @property
    def db_url(self) -> str:
        return self.database_url or f"sqlite+aiosqlite:///{self.data_dir / 'pizzabot.db'}"

    @property
    def base_url(self) -> str:
        return (self.public_url or f"http://{self.host}:{self.port}").rstrip("/")

    def ensure_token(self) -> tuple[str, bool]:
        """The API token: from the environment, else the data folder, else a new one kept there.
        Returns (token, created)."""
        if self.api_token is not None:
            return self.api_token.get_secret_value(), False
        path = self.data_dir / "api-token"
        if path.exists():
            return path.read_text().strip(), False
        self.data_dir.mkdir(parents=True, exist_ok=True)
        token = secrets.token_urlsafe(32)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(token + "\n")
        return token, True


def environment() -> dict[str, str]:
    """The process environment, for skills' `api_key_env` and MCP servers' inherited env."""
    return dict(os.environ)
