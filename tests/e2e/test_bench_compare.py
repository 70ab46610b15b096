"""`pizzabot bench --compare langgraph --quick` runs in CI, so the comparison cannot rot: the
bench makes (or reuses) its LangGraph virtualenv from the package registry, runs every part on
both sides against the same scripted model server and MCP tool server, and writes every figure.
The figures are printed for a reader and checked only for being measured and plausible (a
positive number, a memory figure the size of a Python process): a shared CI machine's timings
are not a pass or a fail."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from bench.compare import lgvenv, run
from tests.conftest import PG_URL

ROOT = Path(__file__).resolve().parents[2]

#: Figures that can be 0 or below on a quick run (a difference or a share of a wall time).
MAY_BE_SMALL = {"rss_waiting_mib", "overhead_ms", "inflight_overhead_p99_ms"}


@pytest.mark.postgres  # Pizza Bot's own PostgreSQL ÷ SQLite figure
@pytest.mark.timeout(1500)  # a first run installs LangGraph's virtualenv; then ~4 minutes
def test_quick_compare_measures_every_figure_on_both_sides(tmp_path: Path) -> None:
    output = tmp_path / "compare.json"
    command = [sys.executable, "-m", "bench", "--compare", "langgraph", "--quick"]
    done = subprocess.run(
        [*command, "--output", str(output), "--postgres", PG_URL],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1400,
    )
    print(done.stdout)  # the table, for whoever reads the CI log
    assert done.returncode == 0, done.stderr[-4000:]
    assert "decision → tool body p50" in done.stdout
    assert "LangGraph" in done.stdout

    result = json.loads(output.read_text())
    assert result["mode"] == "quick"
    assert result["errors"] == {}
    assert result["langgraph_pins"] == list(lgvenv.PINS)
    for row in run.ROWS:
        fig = result["figures"][row.key]
        if row.part in run.PIZZA_ONLY or row.absolute is not None:
            # Pizza Bot's own figure, judged against its own target.
            assert fig["langgraph"] == [] and fig["ratio"] is None, row.key
            assert len(fig["pizzabot"]) == result["sizes"]["rounds"], row.key
            assert all(math.isfinite(v) and v > 0 for v in fig["pizzabot"]), row.key
            assert fig["met"] in (True, False), row.key
            continue
        for side in ("pizzabot", "langgraph"):
            values = fig[side]
            assert len(values) == result["sizes"]["rounds"], (row.key, side, values)
            assert all(math.isfinite(v) for v in values), (row.key, side, values)
            if row.key not in MAY_BE_SMALL:
                assert all(v > 0 for v in values), (row.key, side, values)
        assert fig["ratio"] is not None and math.isfinite(fig["ratio"]), row.key
        # Every row with a target says whether it is met, in the JSON and in the table.
        assert (fig["met"] is None) == (row.target is None and row.absolute is None), row.key
    assert "not met" in done.stdout or "✓ met" in done.stdout
    assert result["figures"]["ready_s"]["pizzabot"][0] > 0
    for side in ("pizzabot", "langgraph"):
        # A Python process with an HTTP client and a database: tens of MiB at least.
        assert result["figures"]["rss_idle_mib"][side][0] > 30
        assert result["figures"]["inflight_peak_rss_mib"][side][0] > 30
        # Every run in flight finished: the rate counts them all over the part's span.
        inflight = result["rounds"]["inflight"][0][side]
        assert inflight["runs"] == result["sizes"]["inflight"]
        # With a 1 s model and one tool call, a run takes two model calls at least.
        assert inflight["wall_p50_s"] >= 2 * result["sizes"]["delay_ms"] / 1000
        decisions = result["rounds"]["decisions"][0][side]
        assert decisions["samples"] == result["sizes"]["samples"]
        assert decisions["waiting"] == result["sizes"]["waiting"]


def test_the_venv_is_reused_while_its_pins_match(tmp_path: Path) -> None:
    """A virtualenv whose stamp names exactly the pins is used as it is: nothing installed."""
    folder = tmp_path / "venv"
    python = lgvenv.python_of(folder)
    python.parent.mkdir(parents=True)
    python.write_text("")
    (folder / lgvenv.STAMP).write_text("\n".join(lgvenv.PINS) + "\n")
    marker = folder / "untouched"
    marker.write_text("")
    assert lgvenv.ensure(folder) == python
    assert marker.exists()
