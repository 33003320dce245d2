"""Fixtures shared by every test package.

``apiserver_process``: a factory starting real ``python -m services.apiserver`` subprocesses
on free loopback ports (SQLite in the test's tmp dir by default, so SIGKILL + restart keeps
state); everything it started is stopped at teardown. See ``tests/apiserver_process.py``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

from tests.apiserver_process import ApiServerProcess

StartApiServer = Callable[..., ApiServerProcess]


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
