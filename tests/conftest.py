"""Fixtures shared by every test package.

``apiserver_process``: a factory starting real ``python -m services.apiserver`` subprocesses
on free loopback ports (SQLite in the test's tmp dir by default, so SIGKILL + restart keeps
state); everything it started is stopped at teardown. See ``tests/apiserver_process.py``.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Generator, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from tests.apiserver_process import ApiServerProcess

StartApiServer = Callable[..., ApiServerProcess]


# Work-around: looptime (0.9) asks the event-loop policy for a loop in *every* test that has
# pytest-asyncio's ``event_loop_policy`` fixture — synchronous tests included — and the policy
# creates one that nobody closes; it is garbage-collected in a later test as an "unclosed
# socket" ResourceWarning, which warnings-as-errors turns into a failure of an innocent test.
# After a synchronous test we close a loop that appeared during it.
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


@pytest.fixture(scope="session", autouse=True)
def _no_implicit_event_loop() -> None:
    """Mark "no current loop" up front: looptime asks the policy for the loop around every
    test, and for a sync test run before any async one that call would create a loop nobody
    closes (its self-pipe then surfaces as a ResourceWarning error in some later test)."""
    asyncio.set_event_loop(None)


@pytest.fixture
def apiserver_process(tmp_path: Path) -> Iterator[StartApiServer]:
    started: list[ApiServerProcess] = []

    def start(*, store: str | None = None, args: Sequence[str] = ()) -> ApiServerProcess:
        n = len(started)
        proc = ApiServerProcess(
            store=store or f"sqlite:///{tmp_path}/apiserver-{n}.db",
            state_dir=tmp_path / f"apiserver-{n}",
            log_path=tmp_path / f"apiserver-{n}.log",
            args=args,
        )
        started.append(proc)
        return proc.start()

    yield start
    for proc in started:
        proc.stop()
