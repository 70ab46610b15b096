"""litellm's import leaves hundreds of thousands of objects that live as long as the process;
`import_litellm` freezes them once, so the garbage collector's full collections (which the
bench saw pause the event loop for hundreds of milliseconds) no longer walk them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CHILD = """
import gc, json
before = gc.get_freeze_count()
from pizzabot.agent.llm import import_litellm
import_litellm()
first = gc.get_freeze_count()
kept = [[i] for i in range(1000)]  # objects made after the import stay in the collector's sight
import_litellm()
print(json.dumps({"before": before, "first": first, "second": gc.get_freeze_count()}))
"""


def test_litellm_import_freezes_its_objects_once() -> None:
    done = subprocess.run(
        [sys.executable, "-c", CHILD], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    counts = json.loads(done.stdout.strip().splitlines()[-1])
    assert counts["before"] == 0
    assert counts["first"] > 100_000  # litellm and what it imports
    assert counts["second"] == counts["first"]
