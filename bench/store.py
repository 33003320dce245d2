"""Store benchmark: creates/s and updates/s per backend, beside the raw ceiling of the same run.

Why a ceiling: ops/s alone depends on the machine (above all on how long an fsync takes); the
ratio to what the bare medium does on the same machine, measured minutes apart, says how much
the store itself costs. Ceilings:

* memory: a plain ``dict`` assignment per operation;
* sqlite: plain ``sqlite3``, WAL, the same ``synchronous`` setting, one ``INSERT`` (or
  ``UPDATE``) plus ``COMMIT`` per row in a loop — one durable transaction per write, which is
  what a store without group commit would be held to.

Each backend runs sequentially (one write in flight: latency-bound) and with ``--concurrency``
writes in flight (64 by default), where the SQLite store's group commit shares one fsync among
all writes queued behind a commit — so its ratio there may exceed 1.

Each figure is the median of ``--rounds`` rounds (3; 1 with ``--quick``), every round measuring
the ceiling right before the store, so that fsync latency swings on a shared machine hit both
sides of a ratio alike.

Run: ``python -m bench.store [--quick] [-n N] [--rounds R] [--concurrency C] [--uvloop]``.
Prints a table; not a test (nothing is asserted).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import itertools
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from store import open_store
from store.base import Store

VALUE = b"x" * 1024
"""About the size of a small pod's JSON."""
UPDATED = b"y" * 1024
"""What updates write: different bytes, or SQLite would skip rewriting an unchanged row."""


@dataclass(frozen=True, slots=True)
class Row:
    backend: str
    operation: str
    in_flight: int
    ops_per_s: float
    ceiling_per_s: float

    @property
    def ratio(self) -> float:
        return self.ops_per_s / self.ceiling_per_s


def _rate(count: int, seconds: float) -> float:
    return count / seconds if seconds > 0 else float("inf")


async def drive(
    operation: Callable[[int], Awaitable[object]], *, count: int, in_flight: int
) -> float:
    """Run ``operation(i)`` for i in range(count) with ``in_flight`` at a time; ops/s."""
    indices = iter(range(count))

    async def worker() -> None:
        for i in indices:
            await operation(i)

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(in_flight)))
    return _rate(count, time.perf_counter() - start)


async def _measure_store(
    store: Store, *, count: int, in_flight: int, tag: str
) -> tuple[float, float]:
    revisions: dict[int, int] = {}

    async def create(i: int) -> None:
        revisions[i] = (await store.create(f"/registry/bench/{tag}/k{i}", VALUE)).mod_revision

    async def update(i: int) -> None:
        kv = await store.update(
            f"/registry/bench/{tag}/k{i}", VALUE, expected_revision=revisions[i]
        )
        revisions[i] = kv.mod_revision

    creates = await drive(create, count=count, in_flight=in_flight)
    updates = await drive(update, count=count, in_flight=in_flight)
    return creates, updates


def _dict_ceiling(count: int) -> tuple[float, float]:
    data: dict[str, bytes] = {}
    keys = [f"/registry/bench/k{i}" for i in range(count)]
    start = time.perf_counter()
    for key in keys:
        data[key] = VALUE
    creates = _rate(count, time.perf_counter() - start)
    start = time.perf_counter()
    for key in keys:
        data[key] = UPDATED
    return creates, _rate(count, time.perf_counter() - start)


def _sqlite_ceiling(path: Path, *, synchronous: str, count: int) -> tuple[float, float]:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute(f"PRAGMA synchronous = {synchronous}")
    conn.execute("CREATE TABLE kv (name TEXT PRIMARY KEY, value BLOB NOT NULL)")
    keys = [f"/registry/bench/k{i}" for i in range(count)]
    start = time.perf_counter()
    for key in keys:
        conn.execute("BEGIN")
        conn.execute("INSERT INTO kv (name, value) VALUES (?, ?)", (key, VALUE))
        conn.execute("COMMIT")
    creates = _rate(count, time.perf_counter() - start)
    start = time.perf_counter()
    for key in keys:
        conn.execute("BEGIN")
        conn.execute("UPDATE kv SET value = ? WHERE name = ?", (UPDATED, key))
        conn.execute("COMMIT")
    updates = _rate(count, time.perf_counter() - start)
    conn.close()
    return creates, updates


async def run(*, count: int, concurrency: int, rounds: int) -> list[Row]:
    """Each round measures the ceiling, then the store; medians over the rounds are reported,
    so that a noisy neighbour (fsync latency swings) hits both sides of a ratio alike."""
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="kubelite-bench-") as tmp:
        workdir = Path(tmp)
        counter = itertools.count()
        backends: list[tuple[str, Callable[[], str], Callable[[], tuple[float, float]]]] = [
            ("memory", lambda: "memory://", lambda: _dict_ceiling(count)),
        ]

        def sqlite_url(sync: str) -> str:
            return f"sqlite://{workdir}/store-{next(counter)}.db?synchronous={sync}"

        def sqlite_ceiling(sync: str) -> tuple[float, float]:
            return _sqlite_ceiling(
                workdir / f"ceiling-{next(counter)}.db", synchronous=sync, count=count
            )

        for sync in ("FULL", "NORMAL"):
            backends.append(
                (
                    f"sqlite {sync}",
                    functools.partial(sqlite_url, sync),
                    functools.partial(sqlite_ceiling, sync),
                )
            )
        for name, url, ceiling in backends:
            samples: dict[tuple[str, int], list[tuple[float, float]]] = {}
            for _ in range(rounds):
                ceiling_creates, ceiling_updates = await asyncio.to_thread(ceiling)
                for in_flight in (1, concurrency):
                    store = open_store(url())
                    try:
                        creates, updates = await _measure_store(
                            store, count=count, in_flight=in_flight, tag=f"c{in_flight}"
                        )
                    finally:
                        await store.close()
                    samples.setdefault(("create", in_flight), []).append((creates, ceiling_creates))
                    samples.setdefault(("update", in_flight), []).append((updates, ceiling_updates))
            for (operation, in_flight), pairs in samples.items():
                rows.append(
                    Row(
                        name,
                        operation,
                        in_flight,
                        statistics.median(p[0] for p in pairs),
                        statistics.median(p[1] for p in pairs),
                    )
                )
    rows.sort(key=lambda r: (r.backend, r.in_flight, r.operation))
    return rows


def render(rows: list[Row], *, count: int, rounds: int) -> str:
    header = (
        f"{'backend':<12} {'op':<7} {'in flight':>9} {'ops/s':>11} {'ceiling/s':>11} {'ratio':>7}"
    )
    lines = [
        f"store bench: {count} writes of {len(VALUE)} B per measurement, median of {rounds} round(s)",
        header,
        "-" * len(header),
    ]
    for row in rows:
        lines.append(
            f"{row.backend:<12} {row.operation:<7} {row.in_flight:>9} {row.ops_per_s:>11,.0f} "
            f"{row.ceiling_per_s:>11,.0f} {row.ratio:>7.3f}"
        )
    lines.append(
        "ceiling: plain dict (memory); plain sqlite3 INSERT/UPDATE + COMMIT per row, "
        "same synchronous (sqlite)"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.store", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--quick", action="store_true", help="small N (500) for a fast look")
    parser.add_argument("-n", type=int, default=None, help="writes per measurement (default 5000)")
    parser.add_argument("--concurrency", type=int, default=64, help="writes in flight (default 64)")
    parser.add_argument("--rounds", type=int, default=None, help="rounds per figure (default 3)")
    parser.add_argument("--uvloop", action="store_true", help="run on uvloop")
    args = parser.parse_args(argv)
    count = args.n or (500 if args.quick else 5000)
    rounds = args.rounds or (1 if args.quick else 3)
    if args.uvloop:
        import uvloop

        rows = uvloop.run(run(count=count, concurrency=args.concurrency, rounds=rounds))
    else:
        rows = asyncio.run(run(count=count, concurrency=args.concurrency, rounds=rounds))
    print(render(rows, count=count, rounds=rounds))
    return 0


if __name__ == "__main__":
    sys.exit(main())
