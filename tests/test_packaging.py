"""What installs: the server's wheel puts one package, `pizzabot`, in site-packages (made of
the repository's folders, its templates and migrations included) and neither the bench nor
the tests; the client's wheel holds `pizzabot.client` alone and needs only httpx and pydantic.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("agent", "bot", "channels", "cli", "store", "tools")


def _copy(names: tuple[str, ...], source: Path, to: Path) -> Path:
    """The files a build reads, copied out: building leaves `build/` and `*.egg-info` behind."""
    junk = shutil.ignore_patterns("__pycache__", "*.egg-info", "build")
    for name in names:
        if (source / name).is_dir():
            shutil.copytree(source / name, to / name, ignore=junk)
        else:
            shutil.copy2(source / name, to / name)
    return to


def _wheel(source: Path, out: Path) -> zipfile.ZipFile:
    # No build isolation: the build backend is the one this environment has (no download).
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(out),
            str(source),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    [wheel] = out.glob("*.whl")
    return zipfile.ZipFile(wheel)


@pytest.fixture(scope="module")
def server_wheel(tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    names = ("pyproject.toml", "README.md", *FOLDERS)
    source = _copy(names, ROOT, tmp_path_factory.mktemp("server-source"))
    return _wheel(source, tmp_path_factory.mktemp("server"))


@pytest.fixture(scope="module")
def client_wheel(tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    names = ("pyproject.toml", "README.md", "pizzabot")
    source = _copy(names, ROOT / "client", tmp_path_factory.mktemp("client-source"))
    return _wheel(source, tmp_path_factory.mktemp("client"))


def _tops(wheel: zipfile.ZipFile) -> set[str]:
    return {n.split("/")[0] for n in wheel.namelist() if ".dist-info/" not in n}


def test_the_server_installs_one_package_and_no_bench(server_wheel: zipfile.ZipFile) -> None:
    names = server_wheel.namelist()
    assert _tops(server_wheel) == {"pizzabot"}
    assert not any(n.startswith(("pizzabot/bench", "bench/", "tests/")) for n in names)
    assert not any(n.startswith("pizzabot/client/") for n in names)  # the client's own wheel
    for needed in (
        "pizzabot/bot/main.py",
        "pizzabot/channels/web/templates/item.html",
        "pizzabot/channels/web/static/live.js",
        "pizzabot/store/migrations/env.py",
        "pizzabot/store/migrations/versions/0010_principals.py",
        "pizzabot/tools/files/server.py",
    ):
        assert needed in names


def test_every_folder_of_the_package_is_listed() -> None:
    """pyproject.toml lists the package's subpackages (the folders map onto `pizzabot.…`):
    one added without a line there would be missing from the wheel."""
    listed = set(
        tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    )
    found = set()
    for folder in FOLDERS:
        for init in (ROOT / folder).rglob("__init__.py"):
            found.add(".".join(["pizzabot", *init.parent.relative_to(ROOT).parts]))
    assert found <= listed
    assert {"pizzabot.store.migrations", "pizzabot.store.migrations.versions"} <= listed


def test_the_client_installs_alone(client_wheel: zipfile.ZipFile) -> None:
    assert _tops(client_wheel) == {"pizzabot"}
    assert all(
        n.startswith("pizzabot/client/") for n in client_wheel.namelist() if ".dist-info/" not in n
    )
    [meta] = [n for n in client_wheel.namelist() if n.endswith(".dist-info/METADATA")]
    requires = Parser().parsestr(client_wheel.read(meta).decode()).get_all("Requires-Dist") or []
    plain = sorted(r.split("==")[0] for r in requires if "extra ==" not in r)
    assert plain == ["httpx", "pydantic"]
    heavy = ("sqlalchemy", "litellm", "slack-bolt", "aioimaplib", "fastapi")
    assert not any(r.lower().startswith(heavy) for r in requires)
