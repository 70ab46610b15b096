"""What importing some of the project's modules loads, asked of a fresh interpreter: the only
honest way to see an import chain, since this process has loaded everything already."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

from tests.peers.server import BYTECODE


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


def loaded_by_a_server(tmp_path: Path, env: dict[str, str], *, among: Iterable[str]) -> list[str]:
    """What of `among` (modules, by full name) a fresh interpreter has loaded once it built
    and shut down a whole server, app included, with `env` as its settings."""
    code = (
        "import asyncio, json, os, sys\n"
        f"os.environ.update({env!r})\n"
        "from pizzabot.bot.settings import Settings\n"
        "from pizzabot.bot.server import build, create_app, shutdown\n"
        "async def main():\n"
        f"    s = Settings(data_dir={str(tmp_path / 'data')!r}, skills_dir={str(tmp_path)!r})\n"
        "    create_app(s, token='t')\n"
        "    await shutdown(await build(s, token='t'))\n"
        "asyncio.run(main())\n"
        f"among = {sorted(among)!r}\n"
        "print(json.dumps(sorted(m for m in among if m in sys.modules)))\n"
    )
    # The servers' shared bytecode: building an app compiles much of the project otherwise.
    run_env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "", "PYTHONPYCACHEPREFIX": str(BYTECODE)}
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        env=run_env,
    )
    loaded: list[str] = json.loads(out.stdout.strip().splitlines()[-1])
    return loaded
