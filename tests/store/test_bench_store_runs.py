"""``python -m bench.store`` still runs end to end and prints a row per measurement."""

from __future__ import annotations

import pytest

from bench.store import main


def test_bench_prints_a_ratio_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["-n", "20", "--rounds", "1", "--concurrency", "4"]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith(("memory", "sqlite"))]
    assert len(rows) == 12
    assert all(float(line.split()[-1]) > 0 for line in rows)
