"""What the CLI shows: text with brackets exactly as written, a run's timeline that says who
decided via which channel, an item's whole card, tables that keep ids and timestamps whole
on a narrow terminal, and `--json` for scripts on every listing.

A real `pizzabot serve` with the offline demo skill; the CLI as a real process.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.test_cli_errors import Cli, serve_demo

MARKUP = "[/oops] markup [demo] and [bold]not bold[/bold]"
STAMP = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \S+")


@pytest.fixture(scope="module")
def cli(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cli]:
    server = serve_demo(tmp_path_factory.mktemp("cli-views"))
    try:
        yield Cli(server)
    finally:
        server.stop()


@pytest.fixture(scope="module")
def decided(cli: Cli) -> dict[str, str]:
    """A demo run whose email was edited from the terminal and then sent."""
    started = cli("run", "demo", MARKUP)
    assert started.code == 0, started.err
    run_id = started.out.split()[1]
    item = cli.wait_item(run_id)
    pending = cli("item", item["id"])
    assert pending.code == 0, pending.err
    edited = cli("edit", item["id"], "--set", "copies=3", "--set", "subject=[b]Pizza[/b]")
    assert edited.code == 0, edited.err
    cli.wait_run(run_id, {"done"})
    return {"run": run_id, "item": item["id"], "pending_card": pending.out}


def test_text_with_brackets_is_shown_as_written(cli: Cli, decided: dict[str, str]) -> None:
    shown = cli("show", decided["run"], columns=200)
    assert shown.code == 0 and "Traceback" not in shown.err, shown.err
    assert MARKUP in shown.out  # the run's input, [demo] included
    assert "[b]Pizza[/b]" in shown.out
    assert "[demo] Done." in shown.out  # the demo model's own [demo] prefix survives
    card = cli("item", decided["item"], columns=200)
    assert card.code == 0 and MARKUP in card.out


def test_the_timeline_says_who_decided_via_which_channel(cli: Cli, decided: dict[str, str]) -> None:
    out = cli("show", decided["run"], columns=120).out
    assert "Run started" in out and "by: owner" in out
    assert "Model call: pizzabot/demo" in out and "tokens in: 60" in out
    assert "Asked a person about demo.send_email" in out and decided["item"] in out
    assert "Edited and approved by owner" in out and "via: api" in out
    assert "copies: 1 → 3" in out and 'subject: "Pizza Friday" → "[b]Pizza[/b]"' in out
    assert "Tool demo.send_email returned" in out and "would have sent 3" in out
    assert "Run done" in out
    assert "(tool_result)" in out  # the event's kind, to match `show --json`


def test_item_shows_the_whole_card(cli: Cli, decided: dict[str, str]) -> None:
    pending = decided["pending_card"]
    assert "What the run is doing" in pending and "Skill: demo" in pending
    assert "The model's last message" in pending and "Tool: send_email on server demo" in pending
    assert "Risk: medium impact · cannot be undone · scope: external" in pending
    assert '"to": "team@example.com"' in pending
    assert f"pizzabot approve {decided['item']}" in pending

    card = cli("item", decided["item"], columns=120).out
    assert "Edited and approved by owner via api at " in card
    assert STAMP.search(card.split("via api at ")[1])
    assert "Final arguments" in card and '"copies": 3' in card
    assert f"pizzabot approve {decided['item']}" not in card


def test_tables_keep_ids_and_timestamps_whole_on_a_narrow_terminal(
    cli: Cli, decided: dict[str, str]
) -> None:
    listing = cli("inbox", "--all", columns=60)
    assert listing.code == 0, listing.err
    assert decided["item"] in listing.out and decided["run"] in listing.out
    assert "…" not in listing.out
    assert "status" in listing.out and "edited" in listing.out
    wide = cli("inbox", "--all", columns=200).out
    assert "┃ id " in wide and decided["item"] in wide  # a table where one fits
    open_only = cli("inbox", "--box", "action", columns=60).out
    assert decided["item"] not in open_only  # decided: only --all shows it

    runs = cli("runs", columns=60).out
    assert decided["run"] in runs and "…" not in runs
    assert STAMP.search(runs)
    audit = cli("audit", columns=60).out
    assert STAMP.search(audit) and "…" not in audit


def test_every_listing_has_json_for_scripts(cli: Cli, decided: dict[str, str]) -> None:
    def listed(*args: str) -> Any:
        done = cli(*args, "--json", columns=40)
        assert done.code == 0, done.err
        data = json.loads(done.out)
        assert isinstance(data, dict)
        return data

    assert any(i["id"] == decided["item"] for i in listed("inbox", "--all")["items"])
    assert any(r["id"] == decided["run"] for r in listed("runs")["items"])
    assert listed("audit")["items"]
    skills = listed("skills")
    assert [s["name"] for s in skills["items"]] == ["demo"]
    assert skills["errors"]  # the refused file, for a script too
    assert "items" in listed("schedules")
    run = listed("show", decided["run"])
    assert run["id"] == decided["run"] and run["events"]
    assert listed("item", decided["item"])["status"] == "edited"
