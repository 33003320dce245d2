"""Test plumbing for the scheduler's tests.

Work-around: looptime (0.9) asks the event-loop policy for a loop in *every* test that has
pytest-asyncio's ``event_loop_policy`` fixture — synchronous tests included — and the policy
creates one that nobody closes; it is garbage-collected in a later test as an "unclosed socket"
ResourceWarning, which our warnings-as-errors turns into a failure of an innocent test. After a
synchronous test we close a loop that appeared during it.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Generator
from typing import Any

import pytest


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
