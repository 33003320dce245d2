"""``make up`` installs kubelite's runtime dependencies only; the test extras (pytest, mypy,
ruff, the official client) come with the targets that use them.

Read from ``make -n -B`` (print every command, as if every file were out of date, run none):
what a fresh clone would run, without creating anything.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")


def planned(target: str) -> list[str]:
    out = subprocess.run(
        ["make", "--no-print-directory", "-n", "-B", target],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
        env={k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")},
    )
    return out.stdout.splitlines()


def pip_installs(commands: list[str]) -> list[str]:
    return [c.split("-e", 1)[1].strip() for c in commands if "pip install" in c and " -e " in c]


def test_make_up_creates_the_venv_and_installs_the_package_without_extras() -> None:
    commands = planned("up")
    assert any("-m venv .venv" in c for c in commands)
    assert pip_installs(commands) == ["."]
    assert commands[-1].startswith(".venv/bin/kubelite up")


def test_make_install_is_the_same_install_without_starting_anything() -> None:
    commands = planned("install")
    assert pip_installs(commands) == ["."]
    assert not any("kubelite up" in c for c in commands)


@pytest.mark.parametrize("target", ["test", "test-fast", "lint", "bench"])
def test_test_lint_and_bench_targets_install_the_test_extras(target: str) -> None:
    commands = planned(target)
    assert any("-m venv .venv" in c for c in commands), "a fresh clone gets its own .venv"
    assert "'.[test]'" in pip_installs(commands)
