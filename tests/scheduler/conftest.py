"""Test plumbing for the scheduler's tests: e2e process fixtures, and one work-around.

``api``: a real apiserver process (memory store); ``start_scheduler(*flags)``: real scheduler
processes against it, stopped at teardown.

Work-around: looptime (0.9) asks the event-loop policy for a loop in *every* test that has
pytest-asyncio's ``event_loop_policy`` fixture — synchronous tests included — and the policy
creates one that nobody closes; it is garbage-collected in a later test as an "unclosed socket"
ResourceWarning, which our warnings-as-errors turns into a failure of an innocent test. After a
synchronous test we close a loop that appeared during it.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.apiserver_process import ApiServerProcess
from tests.scheduler.scheduler_process import SchedulerProcess


def _current_loop() -> asyncio.AbstractEventLoop | None:
    local = getattr(asyncio.get_event_loop_policy(), "_local", None)
    return getattr(local, "_loop", None)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> Generator[None, Any, Any]:
    before = _current_loop()
    try:
        return (yield)
    finally:
        after = _current_loop()
        if (
            not inspect.iscoroutinefunction(pyfuncitem.obj)
            and after is not None
            and after is not before
            and not after.is_running()
        ):
            after.close()
            asyncio.set_event_loop(None)


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
