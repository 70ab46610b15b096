"""`pizzabot bench --compare awaithumans --quick` runs in CI, so the comparison cannot rot: the
bench makes (or reuses) awaithumans's virtualenv from the package registry, starts both servers,
runs the same agents through each one's client library, and writes every figure with its ratio
and whether it meets its target. Timings on a shared machine are printed, not asserted."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from bench.compare import hitl

ROOT = Path(__file__).resolve().parents[2]

#: Figures that can be 0 or below on a quick run (a difference of two memory readings).
MAY_BE_SMALL = {"rss_per_waiting_kib", "crowd_failed", "samples_failed"}


@pytest.mark.timeout(900)  # a first run installs awaithumans's virtualenv; then ~1 minute
def test_quick_compare_with_awaithumans_measures_every_figure_on_both_sides(
    tmp_path: Path,
) -> None:
    output = tmp_path / "compare.json"
    command = [sys.executable, "-m", "bench", "--compare", "awaithumans", "--quick"]
    done = subprocess.run(
        [*command, "--output", str(output)], cwd=ROOT, capture_output=True, text=True, timeout=800
    )
    print(done.stdout)  # the table, for whoever reads the CI log
    assert done.returncode == 0, done.stderr[-4000:]
    assert "decision → agent resumed, p50" in done.stdout
    assert "awaithumans" in done.stdout

    result = json.loads(output.read_text())
    assert result["mode"] == "quick"
    assert result["errors"] == {}
    assert result["awaithumans_pins"] == list(hitl.AH_PINS)
    rounds = result["sizes"]["rounds"]
    for row in hitl.ROWS:
        fig = result["figures"][row.key]
        for side in ("pizzabot", "awaithumans"):
            values = fig[side]
            assert len(values) == rounds and all(math.isfinite(v) for v in values), (row.key, side)
            if row.key not in MAY_BE_SMALL:
                assert all(v > 0 for v in values), (row.key, side, values)
        if row.target:
            assert fig["ratio"] is not None and math.isfinite(fig["ratio"]), row.key
            assert fig["met"] in (True, False), row.key
    for side in ("pizzabot", "awaithumans"):
        one = result["rounds"][0][side]
        # Every timed agent was resumed by its decision, and no waiting agent failed.
        assert one["samples"] == result["sizes"]["samples"], one["samples_errors"]
        assert one["waiting"] == result["sizes"]["crowd"]
        assert one["crowd_failed"] == 0, one["crowd_errors"]
        # A Python web server with a database: tens of MiB at least.
        assert one["rss_ready_mib"] > 30


def test_an_unknown_engine_is_refused_with_the_known_ones(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bench", "--compare", "nosuch", "--output", str(tmp_path / "x")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert "langgraph, awaithumans" in done.stderr
