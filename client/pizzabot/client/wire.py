"""A request on the wire, written once: what an agent sends (`RequestBody`) and where its
request stands (`RequestState`), version `WIRE`.

The server's requests API takes and answers with these very models (its OpenAPI schema is
made from them), the client builds and reads them, the MCP tools hand them over, and a
callback posts a `RequestState`. A field added later is optional, so a client and a server
of different versions still understand each other; a body that names another wire version
is refused with a clear error rather than misread.

    POST /api/requests        RequestBody  → RequestState (201 made, 200 seen before)
    GET  /api/requests/{id}                → RequestState
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = [
    "MAX_PREVIEW",
    "MAX_TEXT",
    "MAX_TIMEOUT",
    "MAX_TITLE",
    "MAX_URL",
    "WIRE",
    "RequestBody",
    "RequestState",
    "RiskNotes",
]

#: The version of these shapes.
WIRE = 1
#: The longest title (a tool's name is the client's default title).
MAX_TITLE = 200
#: The longest description or question.
MAX_TEXT = 4000
#: The longest preview of what the call would do (its card keeps the first 2,000 characters).
MAX_PREVIEW = 20_000
#: The longest a request may wait for a person, in seconds: a week.
MAX_TIMEOUT = 7 * 86400.0
#: The longest callback URL.
MAX_URL = 300
#: A callback URL: http(s), a host (no user or password: the body is signed instead), a port
#: that exists, then printable ASCII only (percent-encode the rest).
_PORT = r"(?::(?:6553[0-5]|655[0-2][0-9]|65[0-4][0-9]{2}|6[0-4][0-9]{3}|[1-5]?[0-9]{1,4}))?"
CALLBACK_URL = r"^https?://[A-Za-z0-9._~%!$&'()*+,;=-]+" + _PORT + r"(?:[/?#][!-~]*)?$"


class RiskNotes(BaseModel):
    """What the requester says of the call's risk, shown on the card where the skill's file
    says nothing of the tool."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    impact: Literal["low", "medium", "high"] | None = None
    reversible: bool | None = None
    scope: Annotated[str | None, Field(max_length=200)] = None


class RequestBody(BaseModel):
    """An approval of a tool call (`tool`, `args`) or a question (`question`), for an
    inbox-only skill."""

    wire: Literal[1] = 1  # WIRE
    skill: Annotated[str, Field(min_length=1, max_length=200)]
    title: Annotated[str, Field(min_length=1, max_length=MAX_TITLE)]
    tool: Annotated[str | None, Field(min_length=1, max_length=300)] = None
    args: dict[str, Any] = {}
    #: A JSON schema of the arguments (approval) or the form to answer (question).
    schema_: dict[str, Any] | None = Field(default=None, alias="schema")
    risk: RiskNotes | None = None
    description: Annotated[str | None, Field(max_length=MAX_TEXT)] = None
    #: Seconds; the item expires after it (else the skill's time-out for the tool).
    timeout: Annotated[float | None, Field(ge=1, le=MAX_TIMEOUT)] = None
    #: Where the decided state is posted, signed with the skill's callback secret.
    callback_url: Annotated[str | None, Field(max_length=MAX_URL, pattern=CALLBACK_URL)] = None
    question: Annotated[str | None, Field(min_length=1, max_length=MAX_TEXT)] = None
    #: What the call would do, in the agent's own words (a dry run's output, a diff): shown
    #: on the card as text, marked as the agent's and not checked by Pizza Bot. Approvals only.
    preview: Annotated[str | None, Field(min_length=1, max_length=MAX_PREVIEW)] = None

    # The schema says "exactly one of tool and question" (and no preview with a question),
    # as the check below does: an OpenAPI client (or a fuzzer) then makes no body the
    # server refuses for it.
    model_config = ConfigDict(
        extra="forbid",
        populate_by_name=True,
        frozen=True,
        json_schema_extra={
            "oneOf": [
                {"required": ["tool"], "properties": {"tool": {"type": "string"}}},
                {
                    "required": ["question"],
                    "properties": {"question": {"type": "string"}},
                    "not": {"required": ["preview"]},
                },
            ]
        },
    )

    @field_validator("callback_url", mode="before")
    @classmethod
    def _url(cls, v: object) -> object:
        """What is wrong with a URL the pattern refuses, in words (the pattern is the rule)."""
        if not isinstance(v, str):
            return v
        try:
            parts = urlsplit(v)
            parts.port  # noqa: B018 - read only to refuse a bad port
        except ValueError:
            raise ValueError("not a URL") from None
        if not v.startswith(("http://", "https://")) or not parts.hostname:
            raise ValueError("an http:// or https:// URL with a host")
        if parts.netloc.rpartition("@")[2].startswith("["):
            raise ValueError("a host name or an IPv4 address, not an [IPv6] literal")
        if parts.username is not None or parts.password is not None:
            raise ValueError("no user or password in the URL: the body is signed instead")
        if not all("!" <= c <= "~" for c in v):
            raise ValueError("no spaces, control or non-ASCII characters: percent-encode them")
        return v

    @model_validator(mode="after")
    def _approval_or_question(self) -> RequestBody:
        if self.tool is None and self.question is None:
            raise ValueError("give tool (and args) for an approval, or question for a question")
        if self.tool is not None and self.question is not None:
            raise ValueError("give tool or question, not both")
        if self.question is not None and self.preview is not None:
            raise ValueError("a question has no call to preview: give preview with tool")
        return self

    @property
    def kind(self) -> Literal["approval", "question"]:
        return "approval" if self.tool is not None else "question"

    def json_body(self) -> dict[str, Any]:
        """The JSON sent: the fields given, by their wire names (a question has no `args`)."""
        body = self.model_dump(mode="json", by_alias=True, exclude_none=True)
        if self.tool is None and not self.args:
            del body["args"]
        return body


class RequestState(BaseModel):
    """A request as the server sees it now: pending, or decided and by whom."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    wire: int = WIRE
    id: str
    item_id: str
    kind: Literal["approval", "question"]
    #: approval: pending | approved | edited | rejected | expired; question: pending |
    #: answered | declined | expired; either: halted (the kill switch is on: do not go ahead).
    status: str
    #: The arguments to run with (approved, edited) or the answer's values (answered);
    #: None while pending or when refused.
    args: dict[str, Any] | None = None
    reason: str | None = None
    decided_by: str | None = None
    via: str | None = None
    decided_at: datetime | None = None
    #: The item's page on the web inbox.
    url: str = ""
    #: Who asked (the token's person, `token:NAME`, or `owner`).
    requested_by: str | None = None
    #: When it was asked.
    created_at: datetime | None = None
    #: Not on the wire: set by whoever reads a POST's answer — this call made the request
    #: (201), rather than finding the one made before under the same key (200).
    created: bool = Field(default=False, exclude=True)

    @property
    def pending(self) -> bool:
        return self.status == "pending"

    @property
    def approved(self) -> bool:
        """Go ahead: approved as asked, edited, or (a question) answered."""
        return self.status in {"approved", "edited", "answered"}

    @property
    def edited(self) -> bool:
        return self.status == "edited"
