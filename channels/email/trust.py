"""When does a mail count as a person's decision? The checks, as pure functions.

Anyone can send a mail with any `From`. A reply decides, and a mail starts or follows up a
run, only when all of these hold:

- the sender is unambiguous: exactly one `From` header, holding exactly one mailbox, that
  the header parser read without a defect (`approver@corp <mallory@evil>` or a second
  `From` decides nothing), with an ASCII address (compared lower-cased, as
  `pizzabot.agent.policy.identity` compares email identities: a look-alike such as the Kelvin sign
  U+212A, which `str.lower()` turns into `k`, never matches);
- the policy lets that sender decide the item (`pizzabot.agent.policy.Access`; not asked here);
- it carries the token the bot gave *that* recipient for the item: in the plus-address the
  reply went to (`bot+<token>@…`, from our `Reply-To`; `Delivered-To` keeps it even for a
  Bcc) or in the Message-ID of our mail it answers (`In-Reply-To` / `References`). A token
  is made per item and recipient with the server's key (see `keys`), so a copy that leaked
  or went to someone else cannot decide as anyone but its own recipient;
- the mail is believed to come from its `From` domain (`authenticated`, by `MailTrust`):

  - rule `"authenticated"` (the default): the topmost `Authentication-Results` that the
    receiving server wrote under its authserv-id (`MailTrust.authserv_id`) holds a passing
    DMARC result for the From domain, or, without a DMARC verdict either way, a passing
    DKIM or SPF result aligned with it. Without that header, with only other servers'
    headers, with results for other domains, or with no authserv-id configured, the mail
    is not believed: the From header alone proves nothing, so a leaked item mail forwarded
    under an approver's forged `From` would otherwise decide as that approver.
  - rule `"mailbox"`: for a mailbox whose server refuses forged mail itself before
    delivery. Only a verdict that *says* the From was forged refuses: DMARC for the From
    domain failed, or SPF / DKIM aligned with it failed and none aligned passed.

  Under either rule a DMARC result counts only for the domain in its `header.from`, and
  `dmarc=none` or `temperror` never outweighs an aligned failure.

Everything here takes the parsed message and returns plain values; `inbound` acts on them.
These checks say whether a mail really comes from its sender; what that sender may do is
the policy's answer.
"""

from __future__ import annotations

import hmac
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from email.message import EmailMessage
from email.utils import getaddresses
from typing import Literal

from pizzabot.agent.policy import normalize_address
from pizzabot.agent.questions import registrable_domain

__all__ = [
    "TRUST_RULES",
    "AuthResult",
    "MailTrust",
    "TrustRule",
    "Verdict",
    "address_of",
    "addresses",
    "auth_failure",
    "authenticated",
    "carries_token",
    "check_reply",
    "is_automatic",
    "message_ids",
    "normalize_address",
    "parse_auth_results",
    "plus_tokens",
    "sender_of",
    "split_address",
    "thread_refs",
]

_MSGID = re.compile(r"<([^<>\s]+)>")


def sender_of(msg: EmailMessage) -> tuple[str | None, str]:
    """(the one sender address, "") or (None, why there is no unambiguous sender)."""
    froms = msg.get_all("From", [])
    if len(froms) != 1:
        return None, f"{len(froms)} From headers"
    header = froms[0]
    defects = getattr(header, "defects", ())
    groups = getattr(header, "groups", None)
    if defects:
        return None, "the From header is malformed"
    if groups is None or len(groups) != 1 or groups[0].display_name is not None:
        return None, "no single sender address in From"
    mailboxes = groups[0].addresses
    if len(mailboxes) != 1:
        return None, "no single sender address in From"
    found = normalize_address(mailboxes[0].addr_spec)
    if found is None:
        return None, "the From address is not a plain ASCII address"
    return found, ""


def address_of(value: str | None) -> str | None:
    """The one address in a `From`-like header text, normalised; None for none or several.

    For a received mail use `sender_of`, which also refuses a malformed header.
    """
    if not value:
        return None
    found = [addr for _name, addr in getaddresses([str(value)]) if "@" in addr]
    if len(found) != 1:
        return None
    return normalize_address(found[0])


def addresses(values: Iterable[str | None]) -> list[str]:
    """Every address in some headers (To, Cc, Delivered-To), lowercased."""
    texts = [str(v) for v in values if v]
    found = (normalize_address(addr) for _name, addr in getaddresses(texts))
    return [addr for addr in found if addr is not None]


def split_address(address: str) -> tuple[str, str]:
    local, _, domain = address.rpartition("@")
    return local, domain.lower()


def message_ids(value: str | None) -> list[str]:
    """The Message-IDs in an `In-Reply-To` or `References` header, without brackets."""
    return _MSGID.findall(str(value)) if value else []


def thread_refs(msg: EmailMessage, limit: int = 50) -> list[str]:
    """Message-IDs this mail answers, nearest first: `In-Reply-To`, then `References` backwards."""
    refs = message_ids(msg["In-Reply-To"])
    refs += list(reversed(message_ids(msg["References"])))
    seen: set[str] = set()
    out: list[str] = []
    for ref in refs:
        if ref not in seen:
            seen.add(ref)
            out.append(ref)
    return out[:limit]


def plus_tokens(msg: EmailMessage, *, bot_address: str) -> set[str]:
    """The `+detail`s of the bot's address among the mail's recipients (lower-cased)."""
    bot_local, bot_domain = split_address(bot_address.lower())
    headers = [
        *msg.get_all("Delivered-To", []),
        *msg.get_all("X-Original-To", []),
        *msg.get_all("To", []),
        *msg.get_all("Cc", []),
    ]
    tokens: set[str] = set()
    for address in addresses(headers):
        local, domain = split_address(address)
        base, plus, detail = local.partition("+")
        if plus and base == bot_local and domain == bot_domain and detail:
            tokens.add(detail)
    return tokens


def carries_token(msg: EmailMessage, *, token: str, bot_address: str, ref: str | None) -> bool:
    """True when `token` is in a plus-address to the bot or in the referenced Message-ID."""
    if not token:
        return False
    wanted = token.lower()
    found = plus_tokens(msg, bot_address=bot_address)
    if ref is not None:
        found |= {part.lower() for part in ref.rpartition("@")[0].split(".")}
    return any(hmac.compare_digest(wanted, candidate) for candidate in found if candidate.isascii())


def is_automatic(msg: EmailMessage) -> str | None:
    """Why a mail was sent by a machine (bounce, auto-reply, list), or None for a person's.

    Answering those would make mail loops, and none of them is a decision.
    """
    auto = str(msg.get("Auto-Submitted", "no")).strip().lower()
    if auto and not auto.startswith("no"):
        return f"Auto-Submitted: {auto}"
    precedence = str(msg.get("Precedence", "")).strip().lower()
    if precedence in {"bulk", "junk", "list", "auto_reply"}:
        return f"Precedence: {precedence}"
    if msg.get("X-Autoreply") or msg.get("X-Autorespond"):
        return "auto-reply header"
    if msg.get_content_type() == "multipart/report":
        return "delivery report"
    return_path = str(msg.get("Return-Path", "")).strip()
    if return_path == "<>":
        return "bounce (empty Return-Path)"
    return None


# --- Authentication-Results (RFC 8601) ---------------------------------------------------


@dataclass(frozen=True)
class AuthResult:
    method: str  # dmarc | spf | dkim | ...
    result: str  # pass | fail | softfail | none | ...
    props: dict[str, str] = field(default_factory=dict)


def _strip_comments(text: str) -> str:
    out: list[str] = []
    depth = 0
    quoted = False
    for ch in text:
        if ch == '"' and depth == 0:
            quoted = not quoted
        if not quoted and ch == "(":
            depth += 1
            continue
        if not quoted and ch == ")" and depth:
            depth -= 1
            continue
        if depth == 0:
            out.append(ch)
    return "".join(out)


_PAIR = re.compile(r'([A-Za-z0-9_.\-]+)\s*=\s*("[^"]*"|[^\s;]+)')


def parse_auth_results(value: str) -> tuple[str, list[AuthResult]]:
    """(authserv-id, results) of one `Authentication-Results` header."""
    parts = _strip_comments(" ".join(str(value).split())).split(";")
    authserv = parts[0].strip().split(" ")[0].lower() if parts else ""
    results: list[AuthResult] = []
    for part in parts[1:]:
        pairs = _PAIR.findall(part)
        if not pairs:
            continue
        method, result = pairs[0]
        props = {k.lower(): v.strip('"').lower() for k, v in pairs[1:]}
        results.append(AuthResult(method.lower(), result.strip('"').lower(), props))
    return authserv, results


def _aligned(domain: str | None, from_domain: str) -> bool:
    """Relaxed alignment (RFC 7489): the same organizational domain, found by the Public
    Suffix List, so `d=mail.corp.co.uk` vouches for `corp.co.uk` and `d=co.uk` for nobody."""
    if not domain:
        return False
    domain = domain.lower().lstrip("@").rpartition("@")[2].rstrip(".")
    from_domain = from_domain.lower().rstrip(".")
    if domain == from_domain:
        return True
    org = registrable_domain(from_domain)
    return org is not None and registrable_domain(domain) == org


def _dkim_or_spf_domain(r: AuthResult) -> str | None:
    if r.method == "dkim":
        return r.props.get("header.d") or r.props.get("header.i")
    if r.method == "spf":
        return r.props.get("smtp.mailfrom") or r.props.get("smtp.helo")
    return None


def _topmost(msg: EmailMessage, authserv_id: str | None) -> tuple[str, list[AuthResult]] | None:
    """The topmost `Authentication-Results` (with `authserv_id`: the topmost one of that
    server) as (authserv-id, results); None when there is none.

    Each server adds its own on top; below it, anything may have come from the sender."""
    for header in msg.get_all("Authentication-Results", []):
        serv, results = parse_auth_results(str(header))
        if authserv_id is None or serv == authserv_id.lower():
            return serv, results
    return None


def _forged(results: list[AuthResult], from_domain: str) -> str | None:
    """Why these results say the From is forged, or None."""
    for r in results:
        if r.method != "dmarc" or r.result != "fail":
            continue
        named = r.props.get("header.from")
        if named is None or _aligned(named, from_domain):
            return "DMARC failed for the From domain"
    if any(
        r.method == "dmarc"
        and r.result == "pass"
        and _aligned(r.props.get("header.from"), from_domain)
        for r in results
    ):
        return None
    aligned = [r for r in results if _aligned(_dkim_or_spf_domain(r), from_domain)]
    if any(r.result == "pass" for r in aligned):
        return None
    methods = sorted({r.method.upper() for r in aligned if r.result in {"fail", "permerror"}})
    if methods:
        return f"{' and '.join(methods)} failed for the From domain"
    return None


def _passes(results: list[AuthResult], from_domain: str) -> bool:
    """A passing DMARC result for the From domain, or a passing DKIM or SPF result aligned
    with it, and nothing that says the From was forged."""
    if _forged(results, from_domain) is not None:
        return False
    return any(
        r.result == "pass"
        and (
            (r.method == "dmarc" and _aligned(r.props.get("header.from"), from_domain))
            or (r.method in {"dkim", "spf"} and _aligned(_dkim_or_spf_domain(r), from_domain))
        )
        for r in results
    )


def auth_failure(msg: EmailMessage, *, from_domain: str, authserv_id: str | None) -> str | None:
    """Why the receiving server's verdict says the From is forged, or None.

    Only the topmost header counts; with `authserv_id`, only headers our server signed with
    that id. No header at all means nothing was checked: that alone refuses nothing here
    (the `"mailbox"` rule; `authenticated` is the default one).

    A DMARC result speaks for the domain in its `header.from`: a pass for another domain
    (say, the second `From` of a doctored mail) proves nothing here, while a fail that does
    not name its domain still counts. Without an aligned DMARC pass or fail, SPF and DKIM
    aligned with the From domain decide: one passing is enough, else one failing forges.
    """
    found = _topmost(msg, authserv_id)
    if found is None:
        return None
    return _forged(found[1], from_domain.lower())


TrustRule = Literal["authenticated", "mailbox"]
TRUST_RULES: tuple[TrustRule, ...] = ("authenticated", "mailbox")


@dataclass(frozen=True)
class MailTrust:
    """Which mail is believed to come from its `From` (see the module docstring).

    `rule="authenticated"` believes a mail only with a passing aligned verdict in the
    topmost `Authentication-Results` from `authserv_id` (none set: no mail is believed);
    `rule="mailbox"` believes every mail its verdict does not call forged, for a mailbox
    whose server refuses spoofed mail itself."""

    rule: TrustRule = "authenticated"
    #: The receiving server's authserv-id: the first word of the Authentication-Results
    #: header it adds (`mx.google.com`, `mx.microsoft.com`'s tenant name, a host name).
    authserv_id: str | None = None

    @property
    def closed(self) -> bool:
        """True when no mail can be believed: the authenticated rule without a server."""
        return self.rule == "authenticated" and not self.authserv_id


def authenticated(msg: EmailMessage, *, from_domain: str, trust: MailTrust) -> str | None:
    """Why this mail is not believed to come from `from_domain`, or None (it is).

    The reason names what was missing: no Authentication-Results, only another server's,
    no result aligned with the From domain, or a failed one."""
    from_domain = from_domain.lower()
    if trust.rule == "mailbox":
        failure = auth_failure(msg, from_domain=from_domain, authserv_id=trust.authserv_id)
        return f"the receiving server's Authentication-Results say: {failure}" if failure else None
    if not trust.authserv_id:
        return (
            "the bot is not told which receiving server's Authentication-Results to trust, "
            "so no mail is believed yet"
        )
    ours = trust.authserv_id.lower()
    headers = msg.get_all("Authentication-Results", [])
    if not headers:
        return f"the mail has no Authentication-Results from {ours}: its sender is unverified"
    found = _topmost(msg, ours)
    if found is None:
        others = sorted({parse_auth_results(str(h))[0] or "?" for h in headers})
        return (
            f"its Authentication-Results come from another server ({', '.join(others)[:200]}), "
            f"not from {ours}: its sender is unverified"
        )
    results = found[1]
    failure = _forged(results, from_domain)
    if failure is not None:
        return f"the receiving server's Authentication-Results say: {failure}"
    if not _passes(results, from_domain):
        return (
            f"the Authentication-Results from {ours} hold no passing DMARC, DKIM or SPF "
            f"result aligned with the From domain {from_domain}: its sender is unverified"
        )
    return None


@dataclass(frozen=True)
class Verdict:
    """The outcome of the trust checks: `problems` empty means the reply counts."""

    problems: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return not self.problems


def check_reply(
    msg: EmailMessage,
    *,
    sender: str,
    token: str,
    ref: str | None,
    bot_address: str,
    trust: MailTrust,
) -> Verdict:
    """Every reason this reply does not count as `sender`'s (none: it does). `token` is the
    one the bot gave `sender` for the item (`keys.MailKey.reply_token`)."""
    problems: list[str] = []
    if not carries_token(msg, token=token, bot_address=bot_address, ref=ref):
        problems.append(
            "the mail does not carry this item's token for your address "
            "(reply to the item's mail you received)"
        )
    unverified = authenticated(msg, from_domain=split_address(sender)[1], trust=trust)
    if unverified:
        problems.append(unverified)
    return Verdict(tuple(problems))
