"""Test plumbing for the scheduler's tests: e2e process fixtures.

``api``: a real apiserver process (memory store); ``start_scheduler(*flags)``: real scheduler
processes against it, stopped at teardown.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.apiserver_process import ApiServerProcess
from tests.scheduler.scheduler_process import SchedulerProcess

# ---- e2e: a real apiserver and real scheduler processes ------------------------------------


@pytest.fixture
def api(apiserver_process: Callable[..., ApiServerProcess]) -> ApiServerProcess:
    """A fresh apiserver on the memory store (nothing to restart in these tests)."""
    return apiserver_process(store="memory://")


@pytest.fixture
def start_scheduler(
    api: ApiServerProcess, tmp_path: Path
) -> Iterator[Callable[..., SchedulerProcess]]:
    """Factory: ``start_scheduler("--no-leader-elect", ...)`` -> a running scheduler process."""
    started: list[SchedulerProcess] = []

    def start(*args: str) -> SchedulerProcess:
        proc = SchedulerProcess(
            server=api.url, log_path=tmp_path / f"scheduler-{len(started)}.log", args=args
        )
        started.append(proc)
        return proc.start()

    yield start
    for proc in started:
        proc.stop()
