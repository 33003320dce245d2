"""The ``cluster`` fixture: a whole kubelite cluster of real processes (``tests/e2e/cluster.py``).

Started as ``kubelite up`` starts it (same command lines), on free loopback ports, state in the
test's tmp dir; stopped as ``kubelite up`` stops it, and the teardown fails if any process of
the cluster — a component, a shim, a container — is left running. When a test fails, the last
lines of every component's output are added to its report.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Generator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.cluster import Cluster, started_cluster


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    async with started_cluster(tmp_path) as c:
        yield c


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: Any) -> Generator[None, Any, Any]:
    report = yield
    c = getattr(item, "funcargs", {}).get("cluster")
    if report.failed and isinstance(c, Cluster):
        for component in c.components.values():
            report.sections.append((f"output of {component.name}", component.tail()))
    return report
