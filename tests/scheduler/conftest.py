"""Test plumbing for the scheduler's tests: e2e process fixtures.

``api``: a real apiserver process (memory store); ``start_scheduler(*flags)``: real scheduler
processes against it, stopped at teardown.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from kubelite.testing import ComponentProcess, Processes

# ---- e2e: a real apiserver and real scheduler processes ------------------------------------


@pytest.fixture
def api(apiserver_process: Callable[..., ComponentProcess]) -> ComponentProcess:
    """A fresh apiserver on the memory store (nothing to restart in these tests)."""
    return apiserver_process(store="memory://")


@pytest.fixture
def start_scheduler(
    api: ComponentProcess, kubelite_processes: Processes
) -> Callable[..., ComponentProcess]:
    """Factory: ``start_scheduler("--no-leader-elect", ...)`` -> a running scheduler process."""

    def start(*args: str) -> ComponentProcess:
        return kubelite_processes.scheduler(api.url, args=["--log-level", "debug", *args])

    return start
