"""What importing some of the project's modules loads, asked of a fresh interpreter: the only
honest way to see an import chain, since this process has loaded everything already."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterable


def loaded_by(modules: Iterable[str], *, among: Iterable[str]) -> list[str]:
    """The modules of `among` (a top-level package, which stands for all of it, or a dotted
    module) that a fresh Python has loaded after importing `modules`."""
    code = (
        "import json, sys\n"
        f"for name in {sorted(modules)!r}: __import__(name)\n"
        f"among = {sorted(among)!r}\n"
        "print(json.dumps(sorted(m for m in sys.modules"
        " if m in among or m.split('.')[0] in among)))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    loaded: list[str] = json.loads(out.stdout)
    return loaded
