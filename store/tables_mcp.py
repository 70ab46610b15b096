"""The MCP OAuth consents table: the consents asked and not yet taken, shared by every server
and worker on the database (`pizzabot.agent.mcp_consents`).

A row is keyed by the SHA-256 of the consent's state. It is written when the card goes out,
answered once by the callback (on whichever process it lands), and deleted when the process
that holds the run takes the answer, gives up, or the row has expired.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import String, Text
from sqlalchemy.orm import Mapped, mapped_column

from pizzabot.store.tables_base import Base


class McpConsentRow(Base):
    __tablename__ = "mcp_consents"
    key: Mapped[str] = mapped_column(String(64), primary_key=True)  # SHA-256 of the state, hex
    skill: Mapped[str] = mapped_column(String(100))
    server: Mapped[str] = mapped_column(String(100))
    run_id: Mapped[str | None] = mapped_column(String(32))
    created_at: Mapped[datetime]
    expires_at: Mapped[datetime] = mapped_column(index=True)
    #: When the service's answer came (None: it has not).
    answered_at: Mapped[datetime | None]
    code: Mapped[str | None] = mapped_column(Text)
    iss: Mapped[str | None] = mapped_column(Text)
    #: The service's refusal, a short token ("no code" when it sent neither).
    error: Mapped[str | None] = mapped_column(String(40))
