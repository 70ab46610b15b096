"""The channels part of `pizzabot bench` on a machine without dovecot: the email figure is
left out with a message that says how to install it, and the other channels are measured."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.timeout(300)
def test_without_dovecot_the_email_figure_is_skipped_and_the_others_measured(
    tmp_path: Path,
) -> None:
    output = tmp_path / "bench.json"
    no_dovecot = (
        "import sys; import bench.channels_email as mail; "
        f"mail.DOVECOT = {str(tmp_path / 'no-dovecot')!r}; from pizzabot.bot.main import main; "
        "sys.argv = ['pizzabot', 'bench', '--quick', '--only', 'channels', "
        f"'--output', {str(output)!r}]; main()"
    )
    done = subprocess.run(
        [sys.executable, "-c", no_dovecot], cwd=ROOT, capture_output=True, text=True, timeout=240
    )
    assert done.returncode == 0, done.stderr[-4000:]
    assert "email figure skipped" in done.stderr
    assert ".ci/install-system-packages" in done.stderr

    result = json.loads(output.read_text())
    assert result["errors"] == {}
    figures = result["figures"]
    assert figures["email_to_tool_p50_ms"] is None
    assert ".ci/install-system-packages" in result["details"]["channels"]["email_skipped"]
    for name in ("slack_to_tool_p50_ms", "web_to_tool_p50_ms", "long_poll_wake_p50_ms"):
        assert figures[name] is not None, name
