"""Ids as people type them: any unique beginning of one, as the web page shows them.

The web and the chat cards show the first 8 characters of an id; a person copies those.
A whole id (16 characters) goes to the server as it is; a shorter hex one is looked up among
the ids the caller can list (items in the inbox, decided ones too; the latest runs), and
one that begins more than one is refused with the ids it begins, so the person can pick.
"""

from __future__ import annotations

from collections.abc import Iterable

from pizzabot.cli.client import CliError, connect

__all__ = ["FULL_ID", "item_id", "run_id", "unique"]

#: The length of a whole id (`pizzabot.agent.context`'s ids).
FULL_ID = 16
#: How many runs a short id is looked for among (the API's largest page).
_RUNS = 1000


_LISTS = {"item": "pizzabot inbox --all", "run": "pizzabot runs"}


def unique(given: str, ids: Iterable[str], what: str) -> str:
    """The one id of `ids` that begins with `given`; a clear error for none or several."""
    found = sorted({i for i in ids if i.startswith(given)})
    if len(found) == 1:
        return found[0]
    if not found:
        lister = _LISTS.get(what, f"pizzabot {what}s")
        raise CliError(f"no {what} id begins with {given!r}: `{lister}` lists them.")
    shown = ", ".join(found[:10]) + (f" and {len(found) - 10} more" if len(found) > 10 else "")
    raise CliError(f"{given!r} begins more than one {what} id ({shown}): give more of it.", code=2)


def _short(given: str) -> bool:
    """A beginning of an id (ids are lower-case hex); anything else goes to the server as
    typed, which says it knows no such thing."""
    return 0 < len(given) < FULL_ID and all(c in "0123456789abcdef" for c in given)


def item_id(url: str | None, token: str | None, given: str) -> str:
    """The whole id of the item `given` begins (any item, decided or read too)."""
    if not _short(given):
        return given
    items = connect(url, token).call("GET", "/api/inbox", params={"all": "true"})["items"]
    return unique(given, (str(i["id"]) for i in items), "item")


def run_id(url: str | None, token: str | None, given: str) -> str:
    """The whole id of the run `given` begins (among the latest runs)."""
    if not _short(given):
        return given
    runs = connect(url, token).call("GET", "/api/runs", params={"limit": _RUNS})["items"]
    return unique(given, (str(r["id"]) for r in runs), "run")
