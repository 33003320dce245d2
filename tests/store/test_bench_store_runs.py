"""The store bench still runs end to end and prints a row per measurement."""

from __future__ import annotations

from bench.store import render, run


async def test_bench_prints_a_ratio_table() -> None:
    rows = await run(count=20, concurrency=4, rounds=1)
    table = render(rows, count=20, rounds=1)
    lines = [line for line in table.splitlines() if line.startswith(("memory", "sqlite"))]
    assert len(lines) == 12
    assert all(float(line.split()[-1]) > 0 for line in lines)
