"""Fixtures shared by every test package.

Real component processes come from the ``kubelite.testing`` plugin (``kubelite_processes``,
``kubelite_control_plane``; ``kubelite/testing/process.py`` is the one launcher). Here:

* ``apiserver_process``: ``kubelite_processes.apiserver`` — ``apiserver_process(store=...,
  args=...)`` starts a real apiserver (SQLite in the test's tmp dir by default, so SIGKILL +
  restart keeps state); stopped at teardown.
* ``session_processes``: the same factory for the whole session (one apiserver shared by the
  tests of a module or package, kept apart by namespace and name).
"""

from __future__ import annotations

import asyncio
import inspect
import socket
from collections.abc import Callable, Generator, Iterator
from typing import Any

import pytest

pytest_plugins = ["kubelite.testing"]
# imported here too (for types): mark it for assertion rewriting before that import
pytest.register_assert_rewrite("kubelite.testing")

from kubelite.testing import ComponentProcess, Processes  # noqa: E402

StartApiServer = Callable[..., ComponentProcess]


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
def apiserver_process(kubelite_processes: Processes) -> StartApiServer:
    return kubelite_processes.apiserver


@pytest.fixture
def refusing_url() -> Iterator[str]:
    """A loopback URL whose port is bound but never listened on, for the whole test: every
    connection is refused, and no other process can take the port meanwhile."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        yield f"http://127.0.0.1:{held.getsockname()[1]}"


@pytest.fixture(scope="session")
def session_processes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Processes]:
    processes = Processes(tmp_path_factory.mktemp("session-processes"))
    try:
        yield processes
    finally:
        processes.stop_all()
