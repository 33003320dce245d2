"""Fixtures for the resource-metrics and autoscaling tests: a whole cluster of real processes.

``cluster`` is ``tests/e2e/cluster.py``'s: exactly what ``kubelite up`` starts (the process
runtime, the apiserver reaching the kubelets over TLS with its client certificate, as
metrics-server would), stopped with the orphan check; ``kubectl`` is the stock binary against
its plain port.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.e2e.cluster import Cluster, started_cluster
from tests.kubectl.harness import Kubectl


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    async with started_cluster(tmp_path) as c:
        yield c


@pytest.fixture
def kubectl(cluster: Cluster, tmp_path: Path) -> Kubectl:
    return Kubectl.on(cluster.server, workdir=tmp_path)
