"""What `pizzabot bench` prints and judges: its targets, its table's rows, and the figures of
the parts that measure at several sizes (the request path's crowds, the fan-out), kept apart
from `bench.runner` so each stays readable."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Target:
    op: str  # "<=" or ">=" or "=="
    value: float
    text: str

    def met(self, value: float | None) -> bool | None:
        if value is None:
            return None
        if self.op == "<=":
            return value <= self.value
        if self.op == ">=":
            return value >= self.value
        return value == self.value


#: The targets. The memory target is for 10,000 waiting runs; smaller counts scale it. Two
#: workers' runs/s has none: on a machine of two cores it measures the machine, not the code.
TARGETS: dict[str, Target] = {
    "step_ms_sqlite": Target("<=", 12.0, "≤ 12 ms"),
    "decision_to_tool_p50_ms": Target("<=", 5.0, "≤ 5 ms"),
    "decision_to_tool_p99_ms": Target("<=", 15.0, "≤ 15 ms"),
    "rss_waiting_delta_mib": Target("<=", 5.0, "≤ 5 MiB per 10,000"),
    "overhead_postgres_vs_sqlite": Target("<=", 1.5, "≤ 1.5×"),
    "cpu_per_run_2_vs_1_worker": Target("<=", 1.1, "≤ 1.1×"),
    "claimed_twice": Target("==", 0, "0"),
    "healthz_s": Target("<=", 1.5, "≤ 1.5 s"),
    "slack_to_tool_p50_ms": Target("<=", 50.0, "≤ 50 ms"),
    "web_to_tool_p50_ms": Target("<=", 20.0, "≤ 20 ms"),
    "long_poll_wake_p50_ms": Target("<=", 50.0, "≤ 50 ms"),
    "crowd_wake_p99_ms": Target("<=", 50.0, "≤ 50 ms at every size"),
    "email_to_tool_p50_ms": Target("<=", 2000.0, "≤ 2 s"),
    "fanout_all_p99_ms": Target("<=", 100.0, "≤ 100 ms"),
    "many_waiting_to_tool_p99_ms": Target("<=", 20.0, "≤ 20 ms"),
    "many_waiting_rss_delta_mib": Target("<=", 20.0, "≤ +20 MiB for 100,000"),
}

# (key, label, unit) in the order the table shows them.
ROWS: list[tuple[str, str, str]] = [
    ("step_ms_sqlite", "step (model + tool), SQLite", "ms"),
    ("overhead_ms_sqlite", "  engine overhead per step, SQLite", "ms"),
    ("model_ms_sqlite", "  model call (HTTP + client) per step", "ms"),
    ("tool_ms_sqlite", "  tool call (MCP stdio) per call", "ms"),
    ("step_median_ms_sqlite", "  per step, the median run", "ms"),
    ("runs_stalled_sqlite", "  runs that waited > 0.5 s to start", ""),
    ("step_ms_postgres", "step (model + tool), PostgreSQL", "ms"),
    ("overhead_ms_postgres", "  engine overhead per step, PostgreSQL", "ms"),
    ("overhead_postgres_vs_sqlite", "  engine overhead, PostgreSQL ÷ SQLite", "×"),
    ("step_median_ms_postgres", "  per step, the median run", "ms"),
    ("runs_stalled_postgres", "  runs that waited > 0.5 s to start", ""),
    ("decision_to_tool_p50_ms", "decision → tool body, p50", "ms"),
    ("decision_to_tool_p99_ms", "decision → tool body, p99", "ms"),
    ("decision_to_started_p50_ms", "  decision → TOOL_STARTED, p50", "ms"),
    ("rss_waiting_delta_mib", "RSS for the waiting runs, per 10,000", "MiB"),
    ("rss_per_waiting_run_kib", "  RSS per waiting run", "KiB"),
    ("runs_per_s_1_worker", "runs/s, 1 worker process (PostgreSQL)", "/s"),
    ("runs_per_s_2_workers", "runs/s, 2 worker processes (PostgreSQL)", "/s"),
    ("workers_speedup", "  2 workers ÷ 1 worker", "×"),
    ("workers_speedup_headroom", "  room on this machine: cores ÷ cores busy, 1 worker", "×"),
    ("cpu_ms_per_run_1_worker", "  CPU per run, all processes, 1 worker", "ms"),
    ("cpu_ms_per_run_2_workers", "  CPU per run, all processes, 2 workers", "ms"),
    ("cpu_per_run_2_vs_1_worker", "  CPU per run, 2 workers ÷ 1 worker", "×"),
    ("claimed_twice", "runs executed twice", ""),
    ("healthz_s", "pizzabot serve start → /healthz", "s"),
    ("ready_s", "pizzabot serve start → /readyz", "s"),
    ("first_run_s", "pizzabot serve start → first run done", "s"),
    ("slack_to_tool_p50_ms", "Slack click POST → tool body, p50", "ms"),
    ("slack_to_tool_p99_ms", "  Slack click POST → tool body, p99", "ms"),
    ("web_to_tool_p50_ms", "web form POST → tool body, p50", "ms"),
    ("web_to_tool_p99_ms", "  web form POST → tool body, p99", "ms"),
    ("long_poll_wake_p50_ms", "decision POST → request long-poll answered, p50", "ms"),
    ("long_poll_wake_p99_ms", "  decision POST → long-poll answered, p99", "ms"),
    ("crowd_wake_p99_ms", "decision → its long-poll, p99, the largest crowd", "ms"),
    ("crowd_wake_p50_ms", "  decision → its long-poll, p50, the largest crowd", "ms"),
    ("crowd_waiting", "  requests held on long-polls, the largest crowd", ""),
    ("crowd_wake_growth", "  its p99 ÷ the smallest crowd's", "×"),
    ("crowd_request_p99_ms", "  request POST → answered, p99, the largest crowd", "ms"),
    ("crowd_rss_per_poll_kib", "  server RSS per held long-poll", "KiB"),
    ("crowd_cores_busy", "  server cores busy meanwhile (the crowd asking again)", ""),
    ("email_to_tool_p50_ms", "email reply accepted by SMTP → tool body, p50", "ms"),
    ("email_to_tool_p99_ms", "  email reply accepted by SMTP → tool body, p99", "ms"),
    ("fanout_all_p99_ms", "decision → every other copy updated, p99", "ms"),
    ("fanout_all_p50_ms", "  decision → every other copy updated, p50", "ms"),
    ("fanout_slack_p99_ms", "  → Slack chat.update at the recorder, p99", "ms"),
    ("fanout_web_p99_ms", "  → the web page's live region answered, p99", "ms"),
    ("fanout_email_p99_ms", "  → the note in the mail thread at SMTP, p99", "ms"),
    ("fanout_waiting", "  items waiting meanwhile", ""),
    ("many_waiting_to_tool_p99_ms", "decision → tool body, p99, the many waiting", "ms"),
    ("many_waiting_to_tool_p50_ms", "  decision → tool body, p50, the many waiting", "ms"),
    ("many_waiting", "  runs waiting meanwhile (copied in the database)", ""),
    ("many_waiting_rss_delta_mib", "RSS growth of an engine process, the many waiting", "MiB"),
    ("many_waiting_timers_pass_s", "  one whole pass of the approval clock over them", "s"),
]


def crowd_figures(crowds: dict[str, Any] | None) -> dict[str, float | None]:
    """The request path's figures: at the largest crowd, and how its p99 grew from the
    smallest's (1.0: flat in the number waiting)."""
    keys = ("wake_p99_ms", "wake_p50_ms", "waiting", "wake_growth", "request_p99_ms")
    if not crowds:
        return {f"crowd_{k}": None for k in (*keys, "rss_per_poll_kib", "cores_busy")}
    sizes = sorted(crowds.values(), key=lambda c: c["waiting"])
    small, large = sizes[0], sizes[-1]
    return {
        "crowd_wake_p99_ms": large["wake_p99_ms"],
        "crowd_wake_p50_ms": large["wake_p50_ms"],
        "crowd_waiting": float(large["waiting"]),
        "crowd_wake_growth": large["wake_p99_ms"] / small["wake_p99_ms"],
        "crowd_request_p99_ms": large["request_p99_ms"],
        "crowd_rss_per_poll_kib": large["rss_per_held_poll_kib"],
        "crowd_cores_busy": large["server_cores_busy_timed"],
    }


def fanout_figures(fanout: dict[str, Any] | None) -> dict[str, float | None]:
    """The fan-out's figures: per copy and for the last of them (`bench.fanout`)."""
    keys = [f"{n}_{p}_ms" for n in ("all", "slack", "web", "email") for p in ("p50", "p99")]
    if not fanout:
        return {f"fanout_{k}": None for k in (*keys, "waiting")}
    return {f"fanout_{k}": float(fanout[k]) for k in (*keys, "waiting")}


def waiting_figures(waiting: dict[str, Any] | None) -> dict[str, float | None]:
    """The figures of the many waiting runs (`bench.waiting`)."""
    keys = {
        "many_waiting_to_tool_p99_ms": "p99_ms",
        "many_waiting_to_tool_p50_ms": "p50_ms",
        "many_waiting": "waiting",
        "many_waiting_rss_delta_mib": "rss_delta_mib",
        "many_waiting_timers_pass_s": "rss_timers_pass_s",
    }
    return {k: None if not waiting else float(waiting[v]) for k, v in keys.items()}
