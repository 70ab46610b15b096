"""How each channel's identities are compared: exactly, after one strict normalisation.

An identity counts only in the form its channel gives it. Slack user ids, Teams users'
Microsoft Entra object ids (`from.aadObjectId`), Discord user ids and Telegram user ids are
compared as each platform sends them; a Discord or Telegram id is a decimal number, so a
value with anything else in it, and a Teams id with a space or a non-ASCII character, is no
identity. Email addresses are lower-cased only when they are plain ASCII: `str.lower`
maps some non-ASCII letters onto ASCII ones (U+212A KELVIN SIGN becomes `k`), so an address
with any non-ASCII character never matches, whatever it looks like. A value that has no
normal form matches nobody, and nobody matches it.
"""

from __future__ import annotations

SLACK = "slack"
EMAIL = "email"
TEAMS = "teams"
DISCORD = "discord"
TELEGRAM = "telegram"


def normalize_address(value: str | None) -> str | None:
    """An address as the bot compares it: ASCII only, lower-cased; None for anything else."""
    if not value:
        return None
    text = value.strip()
    if not text.isascii() or text.count("@") != 1 or any(ch.isspace() for ch in text):
        return None
    local, _, domain = text.partition("@")
    if not local or not domain:
        return None
    return text.lower()


def identity_key(channel: str, identity: str | None) -> str | None:
    """`identity` in the form it is compared in on `channel`; None when it has none."""
    if not identity:
        return None
    if channel == EMAIL:
        return normalize_address(identity)
    if channel in (DISCORD, TELEGRAM):
        return identity if identity.isascii() and identity.isdigit() else None
    if channel == TEAMS:
        plain = identity.isascii() and not any(ch.isspace() for ch in identity)
        return identity if plain else None
    return identity


def same_identity(channel: str, a: str | None, b: str | None) -> bool:
    """Whether `a` and `b` are the same person's identity on `channel`."""
    ka = identity_key(channel, a)
    return ka is not None and ka == identity_key(channel, b)
