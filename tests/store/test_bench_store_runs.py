"""The store bench still runs end to end and prints a row per measurement."""

from __future__ import annotations

from bench.store import render, run


async def test_bench_prints_a_ratio_table() -> None:
    rows = await run(count=20, concurrency=4, rounds=1)
    table = render(rows, count=20, rounds=1)
    lines = [line for line in table.splitlines() if line.startswith(("memory", "sqlite"))]
    assert len(lines) == 12
    # the printed ratio may round to 0.000 for memory (a dict is that much faster); check figures
    assert all(row.ops_per_s > 0 and row.ceiling_per_s > 0 for row in rows)
