"""`pizzabot item`, `inbox`, `approve`, `edit`, `reject`, `read`, `undo`: the inbox and deciding.

A decision is bound to the card it was made on: the digest of the item as the command read
it (or `--seen`), so a change made in between is refused by the server, not decided."""

from __future__ import annotations

import json
from typing import Annotated, Any
from urllib.parse import quote

import typer
from rich.table import Column

from pizzabot.cli import ids
from pizzabot.cli.client import ApiError, CliError
from pizzabot.cli.common import BoxName, JsonOpt, TokenOpt, UrlOpt, api_of, app, call, print_line
from pizzabot.cli.render import (
    arg_lines,
    compact,
    console,
    dump_json,
    empty,
    id_column,
    item_card,
    table,
    text_column,
)


@app.command()
def item(
    item_id: str, url: UrlOpt = None, token: TokenOpt = None, as_json: JsonOpt = False
) -> None:
    """Show an inbox item's whole card: the run, the tool, its risk, the arguments, the decision."""
    api = api_of(url, token)
    item_id = ids.item_id(url, token, item_id)
    it = api.call("GET", f"/api/items/{quote(item_id, safe='')}")
    if as_json:
        dump_json(it)
        return
    try:
        run_ = api.call("GET", f"/api/runs/{quote(str(it['run_id']), safe='')}")
    except ApiError:
        run_ = None  # the card still says everything about the item itself
    item_card(it, run_)


@app.command()
def inbox(
    box: Annotated[BoxName | None, typer.Option(help="Only this box")] = None,
    all_: Annotated[
        bool, typer.Option("--all", help="Also decided and read items, not only open ones")
    ] = False,
    url: UrlOpt = None,
    token: TokenOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """List the inbox: Action items waiting for you, Unread results."""
    params: dict[str, Any] = {"all": "true"} if all_ else {}
    if box is not None:
        params["box"] = box.value
    data = call(url, token, "GET", "/api/inbox", params=params)
    if as_json:
        dump_json(data)
        return
    if not data["items"]:
        empty("items" if all_ else "open items: --all shows decided and read ones too")
        return
    cols: list[Column | str] = [id_column(), "box"]
    if all_:
        cols.append("status")
    cols += [id_column("run"), text_column("title", ratio=1), text_column("args", ratio=1)]
    rows = []
    for i in data["items"]:
        row = [i["id"], i["box"], *([i["status"]] if all_ else []), i["run_id"], i["title"]]
        rows.append([*row, arg_lines(i["args"])])
    console.print(table(cols, rows))


SeenOpt = Annotated[
    str | None,
    typer.Option(
        "--seen",
        help="The card's digest as `pizzabot item` showed it: the decision counts only if the "
        "item is still as shown",
    ),
]
YesOpt = Annotated[
    bool,
    typer.Option(
        "--yes",
        help="Decide an item someone edited since it was made as it is now, without --seen",
    ),
]


def _decide(
    url: str | None,
    token: str | None,
    item_id: str,
    body: dict[str, Any],
    *,
    seen: str | None = None,
    edited_ok: bool = True,
) -> Any:
    """Decide, bound to the card as it was seen (`seen`), else as it is read here: a change
    in between is refused by the server rather than decided.

    Without `seen`, an item nobody edited is the card every earlier look showed, so reading
    it now binds the same arguments; an edited one may differ from what the person looked at,
    so approving or editing it (`edited_ok` False) wants `--seen` or `--yes`."""
    item_id = ids.item_id(url, token, item_id)
    if seen is None:
        current = call(url, token, "GET", f"/api/items/{quote(item_id, safe='')}")
        if not edited_ok:
            _refuse_edited(current)
        seen = current.get("digest")
    if seen:
        body = {**body, "seen": seen}
    # json.dumps writes 1e999 as Infinity (httpx's json= refuses it): the server then answers
    # with the field's error, as it would to any other client.
    return call(
        url,
        token,
        "POST",
        f"/api/items/{quote(item_id, safe='')}/decision",
        content=json.dumps(body),
        headers={"content-type": "application/json"},
    )


def _refuse_edited(current: dict[str, Any]) -> None:
    """An open item someone edited since it was made may not be what the person looked at:
    name its arguments now and ask for `--seen` or `--yes`."""
    version = int(current.get("version") or 1)
    if version > 1 and current.get("status") == "pending":
        item_id = current["id"]
        raise CliError(
            f"{item_id} was edited since it was made (version {version}); its arguments are "
            f"now {compact(current.get('args') or {})}. Look at it with `pizzabot item "
            f"{item_id}`, then decide with --seen {current.get('digest')}, or give --yes to "
            "decide it as it is now.",
            code=1,
        )


@app.command()
def approve(
    item: Annotated[str | None, typer.Argument(help="The Action item to approve")] = None,
    run: Annotated[
        str | None, typer.Option("--run", help="With --all: the run whose calls to approve")
    ] = None,
    all_: Annotated[
        bool,
        typer.Option(
            "--all",
            help="Approve every call the run's model asked for together (each on its own; "
            "one that needs more approvers is left out and said so)",
        ),
    ] = False,
    grant: Annotated[
        str | None,
        typer.Option(
            "--grant",
            help="And don't ask again for this tool: run (the rest of this run), a duration "
            "the tool offers (1h), or exact (these arguments, until revoked)",
        ),
    ] = None,
    seen: SeenOpt = None,
    yes: YesOpt = False,
    url: UrlOpt = None,
    token: TokenOpt = None,
) -> None:
    """Approve an Action item: the tool runs with the proposed arguments. With --run RUN
    --all: every call of the run's waiting turn."""
    if all_ or run is not None:
        _approve_all(url, token, item, run, all_, grant)
        return
    if item is None:
        raise CliError("Name the item to approve, or give --run RUN --all.", code=2)
    body: dict[str, Any] = {"decision": "approve"}
    if grant is not None:
        body["grant"] = grant
    r = _decide(url, token, item, body, seen=seen, edited_ok=yes)
    print_line(f"{r['id']}: {r['status']}")
    _say_count(r)
    if grant is not None:
        print_line(f"granted {grant} for {r['tool']}: `pizzabot grants` lists it, `revoke` ends it")


def _approve_all(
    url: str | None,
    token: str | None,
    item: str | None,
    run: str | None,
    all_: bool,
    grant: str | None,
) -> None:
    if item is not None or grant is not None or run is None or not all_:
        raise CliError("Approve all as: pizzabot approve --run RUN --all", code=2)
    path = f"/api/runs/{quote(ids.run_id(url, token, run), safe='')}/decisions"
    # Bound to the calls as read here: one edited in between is left out, not approved.
    turn = call(url, token, "GET", path)
    seen = {i["id"]: i["digest"] for i in turn["items"]}
    r = call(url, token, "POST", path, json={"decision": "approve", "all": True, "seen": seen})
    for result in r["results"]:
        i = result["item"]
        said = i["status"] if result["approved"] else f"left out: {result['why']}"
        print_line(f"{i['id']}: {i['tool'] or i['title']}: {said}")
    if not r["results"]:
        print_line(r["summary"])


def _new_args(
    item: str,
    set_: list[str] | None,
    args: str | None,
    url: str | None,
    token: str | None,
    *,
    edited_ok: bool,
) -> tuple[dict[str, Any], str | None]:
    """The edited arguments, and the digest of the card they were made from (`--set` changes
    the arguments as read now; a change meanwhile is refused, not overwritten)."""
    if args is not None and set_:
        raise CliError("Give --set NAME=VALUE or --args JSON, not both.", code=2)
    if args is not None:
        try:
            new = json.loads(args)
        except json.JSONDecodeError as exc:
            raise CliError(
                f"--args is not valid JSON ({exc.msg} at character {exc.pos + 1}): give an "
                """object, e.g. --args '{"copies": 3}'""",
                code=2,
            ) from None
        if not isinstance(new, dict):
            raise CliError(
                f"--args must be a JSON object of argument names and values, e.g. "
                f"""--args '{{"copies": 3}}' (got {type(new).__name__ if new is not None else "null"})""",
                code=2,
            )
        return new, None
    if not set_:
        raise CliError(
            "Nothing to change: give --set NAME=VALUE (repeatable) or --args JSON "
            f"(`pizzabot item {item}` shows the arguments); to keep them, approve.",
            code=2,
        )
    current = call(url, token, "GET", f"/api/items/{quote(ids.item_id(url, token, item), safe='')}")
    if not edited_ok:
        _refuse_edited(current)
    new = dict(current.get("args") or {})
    for pair in set_:
        name, eq, value = pair.partition("=")
        if not eq or not name.strip():
            raise CliError(f"--set takes NAME=VALUE (got {pair!r}).", code=2)
        try:
            new[name.strip()] = json.loads(value)
        except json.JSONDecodeError:
            new[name.strip()] = value  # a bare word is text
    return new, current.get("digest")


@app.command()
def edit(
    item: str,
    set_: Annotated[
        list[str] | None,
        typer.Option("--set", help="NAME=VALUE, repeatable; VALUE is JSON or else text"),
    ] = None,
    args: Annotated[
        str | None, typer.Option("--args", help="All the new arguments as a JSON object")
    ] = None,
    seen: SeenOpt = None,
    yes: YesOpt = False,
    url: UrlOpt = None,
    token: TokenOpt = None,
) -> None:
    """Edit an Action item's arguments, then let the tool run with them."""
    new, read = _new_args(item, set_, args, url, token, edited_ok=yes or seen is not None)
    r = _decide(
        url, token, item, {"decision": "edit", "args": new}, seen=seen or read, edited_ok=yes
    )
    if r["status"] == "pending":  # more than one person must approve: a new count
        print_line(f"{r['id']}: edited to {compact(r['args'])}")
        _say_count(r)
        return
    print_line(f"{r['id']}: {r['status']} with {compact(r['final_args'])}")


def _say_count(r: dict[str, Any]) -> None:
    """Where more than one person must approve and the count is not reached yet."""
    risk = r.get("risk") or {}
    required = risk.get("approvals_required") or 1
    if r.get("status") == "pending" and required > 1:
        approved = list(risk.get("approved") or [])
        print_line(f"{len(approved)} of {required} approved: {', '.join(approved)}")
        print_line("another person must approve it")


@app.command()
def reject(
    item: str,
    reason: Annotated[str, typer.Argument(help="Why; the model reads it")] = "",
    seen: SeenOpt = None,
    url: UrlOpt = None,
    token: TokenOpt = None,
) -> None:
    """Reject an Action item, with a reason the model reads."""
    r = _decide(url, token, item, {"decision": "reject", "reason": reason}, seen=seen)
    print_line(f"{r['id']}: {r['status']}")


@app.command()
def read(item: str, url: UrlOpt = None, token: TokenOpt = None) -> None:
    """Mark an Unread item read."""
    item = ids.item_id(url, token, item)
    r = call(url, token, "POST", f"/api/items/{quote(item, safe='')}/read")
    print_line(f"{r['id']}: {r['status']}")


@app.command()
def undo(item: str, url: UrlOpt = None, token: TokenOpt = None, as_json: JsonOpt = False) -> None:
    """Undo what a `notify` FYI says ran: run the compensating call it offers (once). Exit 1
    when that call failed."""
    item = ids.item_id(url, token, item)
    r = call(url, token, "POST", f"/api/items/{quote(item, safe='')}/undo")
    if as_json:
        dump_json(r)
        return
    said = r.get("undo") or {}
    word = "undone" if said.get("state") == "done" else f"undo {said.get('state')}"
    print_line(f"{r['id']}: {word}: {said.get('tool')} answered: {said.get('outcome')}")
    if said.get("state") == "failed":
        raise typer.Exit(1)
