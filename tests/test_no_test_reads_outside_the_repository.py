"""No test or benchmark names a file of one particular machine.

A test that reads ``/work/...`` or ``/home/<someone>/...`` passes on the machine it was written
on and fails at collection on every other clone. Test data lives in the repository (under
``tests/fixtures`` or beside the test) and is found relative to ``__file__``. This guard walks
every string literal — f-string pieces included — of ``tests/**/*.py`` and ``bench/**/*.py``
and refuses one that starts an absolute path under a home or workspace root.

It checks literals, not what a test computes at run time: ``Path.home()`` or a path read from
the environment would pass it. Those are for scratch space a test creates, not for data it reads.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# Roots under which one machine keeps its checkouts and shared data. Spelled out piecewise so
# this file does not trip its own check.
_ROOTS = ("work", "home", "Users", "root", "mnt", "srv")
MACHINE_PATH = re.compile(r"(?:^|[\s\"'=:(,])/(?:" + "|".join(_ROOTS) + r")/")


def machine_paths(source: str) -> list[tuple[int, str]]:
    """(line, literal) of every string literal in ``source`` naming a machine-specific path."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if MACHINE_PATH.search(node.value):
                found.append((node.lineno, node.value))
    return found


def test_the_guard_finds_absolute_paths_in_literals() -> None:
    root = "/" + "work"
    source = (
        "from pathlib import Path\n"
        f"SAMPLE = Path('{root}/shared/reference/x.json')\n"
        f"OTHER = f'{{base}}:{root}/y'\n"
        "FINE = Path(__file__).parent / 'fixtures' / 'x.json'\n"
        "URL = 'http://127.0.0.1:8080/api/v1/namespaces/work/pods'\n"
    )
    assert [line for line, _ in machine_paths(source)] == [2, 3]


def test_no_test_or_bench_module_reads_a_path_outside_the_repository() -> None:
    modules = sorted([*REPO.glob("tests/**/*.py"), *REPO.glob("bench/**/*.py")])
    assert len(modules) > 50, "the glob found too few modules: is REPO right?"
    offenders = [
        f"{path.relative_to(REPO)}:{line}: {literal!r}"
        for path in modules
        for line, literal in machine_paths(path.read_text())
    ]
    assert not offenders, "keep test data in the repository:\n" + "\n".join(offenders)
