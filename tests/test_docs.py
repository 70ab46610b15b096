"""The README and docs/ say only what works: the site builds with every link resolving, every
relative link in the README points at a file that exists, every skill example loads, and
every `pizzabot` command shown names a real command with real options."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer.main

from bench.cli import app as bench_app
from pizzabot.agent.skills import parse_skill
from pizzabot.bot.main import app

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PAGES = [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]

_FENCE = re.compile(
    r"^(?P<indent> *)```(?P<lang>[\w-]*)\n(?P<body>.*?)^(?P=indent)```", re.M | re.S
)
_LINK = re.compile(r"\]\((?P<target>[^)\s]+)\)")


def _blocks(page: Path, *langs: str) -> list[str]:
    found = []
    for match in _FENCE.finditer(page.read_text()):
        if match["lang"] in langs:
            indent = len(match["indent"])
            found.append("\n".join(line[indent:] for line in match["body"].splitlines()))
    return found


def test_the_site_builds_with_every_link_resolving(tmp_path: Path) -> None:
    # -W: a link to a page or heading that does not exist is a warning, and so a failure.
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "sphinx",
            "-W",
            "--keep-going",
            "-q",
            "-b",
            "html",
            str(DOCS),
            str(tmp_path / "site"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "site" / "skills.html").exists()


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_relative_links_point_at_files_that_exist(page: Path) -> None:
    missing = []
    for match in _LINK.finditer(page.read_text()):
        target = match["target"]
        if re.match(r"^[a-z]+:", target) or target.startswith("#"):
            continue
        if not (page.parent / target.split("#")[0]).exists():
            missing.append(target)
    assert missing == []


def _skill_examples() -> list[tuple[str, str]]:
    found = []
    for page in PAGES:
        for body in _blocks(page, "yaml"):
            # A skill with a model has instructions; an inbox-only one has none, but people.
            whole = re.search(r"^(instructions|approvers|people):", body, re.M)
            if re.search(r"^name:", body, re.M) and whole:
                found.append((page.name, body))
    return found


def test_the_docs_show_a_whole_skill() -> None:
    assert any(name == "skills.md" for name, _ in _skill_examples())


@pytest.mark.parametrize(("page", "text"), _skill_examples(), ids=lambda v: str(v)[:20])
def test_every_whole_skill_example_loads(page: str, text: str) -> None:
    skill = parse_skill(text, f"{page} example")
    assert skill.name


def _commands() -> list[tuple[str, str]]:
    found = []
    for page in PAGES:
        for body in _blocks(page, "sh", "bash", "shell"):
            joined = re.sub(r"\\\n\s*", " ", body)
            for line in joined.splitlines():
                line = line.split(" #")[0].strip()
                if re.match(r"^(\.venv/bin/)?pizzabot\b", line):
                    found.append((page.name, line))
    return found


def test_the_docs_show_commands() -> None:
    assert len(_commands()) > 10


@pytest.mark.parametrize(("page", "line"), _commands(), ids=lambda v: str(v)[:40])
def test_every_command_shown_exists_with_its_options(page: str, line: str) -> None:
    words = shlex.split(line)[1:]
    # Typer carries its own copy of click's classes: walk them by what they offer.
    command: Any = typer.main.get_command(app)
    while hasattr(command, "list_commands") and words and not words[0].startswith("-"):
        sub = command.commands.get(words[0])
        assert sub is not None, f"{page}: `{line}`: no command {words[0]!r}"
        command, words = sub, words[1:]
        if command.name == "bench":  # forwards to the benchmark's own command
            command = typer.main.get_command(bench_app)
    known = {opt for param in command.params for opt in getattr(param, "opts", [])}
    known |= {opt for param in command.params for opt in getattr(param, "secondary_opts", [])}
    for word in words:
        if word.startswith("--"):
            assert word.split("=")[0] in known | {"--help"}, f"{page}: `{line}`: no option {word}"
