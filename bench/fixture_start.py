"""How long the ``kubelite_cluster`` pytest fixture takes from start to a ready apiserver.

Why: the fixture is envtest for Python, and envtest's cost is its start-up — several seconds
to launch a downloaded kube-apiserver and etcd before the first test can run. Ours should be
well under a second, so that a test suite can afford a fresh cluster per test.

* ``in-process start``: ``start_cluster()`` (what the fixture calls) until the apiserver has
  answered ``GET /readyz`` with 200, then ``stop()`` — the apiserver over the memory store on
  its own loop in a thread of this process;
* ``subprocess start``: the same apiserver as a process (``kubelite.testing.Processes``, what
  ``kubelite_apiserver`` runs) until its ready line, for comparison: mostly interpreter start-up
  and imports.

Each figure is the median of ``--starts`` (10) starts.

Limits: the first in-process start of a run pays for importing the apiserver's modules; the
later ones do not, as in a test session.

``python -m bench.fixture_start [--starts N]``.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from bench.harness import Context, Figure, collect_rounds, figure
from kubelite.testing import Processes
from kubelite.testing.pytest_plugin import start_cluster

SCENARIO = "fixture-start"


def _in_process(root: Path) -> float:
    started = time.perf_counter()
    cluster = start_cluster(root)
    try:
        with urllib.request.urlopen(f"{cluster.url}/readyz", timeout=10) as resp:
            if resp.status != 200:
                raise RuntimeError(f"/readyz answered {resp.status}")
        return time.perf_counter() - started
    finally:
        cluster.stop()


def _subprocess(root: Path) -> float:
    processes = Processes(root)
    started = time.perf_counter()
    try:
        processes.apiserver(store="memory://")
        return time.perf_counter() - started
    finally:
        processes.stop_all()


def measure(*, starts: int, workdir: Path) -> dict[str, float]:
    """Median seconds from start to ready, in-process and as a subprocess."""
    return {
        "in-process start": statistics.median(
            _in_process(workdir / f"in-process-{i}") for i in range(starts)
        ),
        "subprocess start": statistics.median(
            _subprocess(workdir / f"subprocess-{i}") for i in range(max(1, starts // 2))
        ),
    }


async def run(ctx: Context) -> list[Figure]:
    """The suite's scenario: both start times, median of 10 starts (4 with ``--quick``)."""
    starts = 4 if ctx.quick else 10

    async def once(index: int) -> dict[str, float]:
        workdir = ctx.workdir / f"{SCENARIO}-{index}"
        workdir.mkdir(parents=True, exist_ok=True)
        seconds = await asyncio.to_thread(measure, starts=starts, workdir=workdir)
        return {name: value * 1000 for name, value in seconds.items()}

    rounds = await collect_rounds(once, rounds=ctx.rounds)
    note = f"median of {starts} starts until /readyz answers 200; envtest takes several seconds"
    return [
        figure(SCENARIO, "in-process start", unit="ms", samples=rounds["in-process start"],
               note=note),
        figure(SCENARIO, "subprocess start", unit="ms", samples=rounds["subprocess start"],
               note="the apiserver as a process, until its ready line"),
    ]  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.fixture_start", description=__doc__)
    p.add_argument("--starts", type=int, default=10)
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="kubelite-fixture-bench-") as tmp:
        figures = measure(starts=args.starts, workdir=Path(tmp))
    for name, seconds in figures.items():
        print(f"{name:18} {seconds * 1000:8.1f} ms (median of {args.starts})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
