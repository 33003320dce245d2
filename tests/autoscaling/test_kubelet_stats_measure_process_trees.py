"""The kubelet's figures for a process container: its whole tree, reaped children included; and
the same figures as ``/metrics/resource``.

A real process stands in for a container: it runs a child that burns CPU and exits, then
sleeps. The child is gone by the time the kubelet looks, yet its CPU time still counts (the
parent's ``cutime``), so the container's cumulative counter never falls back; the Summary the
kubelet serves carries it in Kubernetes' shape.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
from prometheus_client.parser import text_string_to_metric_families

from services.kubelet.runtime.base import ContainerRecord
from services.kubelet.stats import NodeStats, ProcessUsage, resource_metrics

BURN_THEN_SLEEP = """
import subprocess, sys, time
subprocess.run([sys.executable, "-c", "x = 0\\nfor i in range(3 * 10**6): x += i"])
print("child reaped", flush=True)
time.sleep(120)
"""


@pytest.fixture
def container() -> Iterator[subprocess.Popen[str]]:
    with subprocess.Popen(
        [sys.executable, "-c", BURN_THEN_SLEEP], stdout=subprocess.PIPE, text=True
    ) as proc:
        try:
            assert proc.stdout is not None
            assert proc.stdout.readline().strip() == "child reaped"  # the child has exited
            yield proc
        finally:
            proc.kill()


def test_a_reaped_childs_cpu_still_counts(container: subprocess.Popen[str]) -> None:
    usage = ProcessUsage().of_tree(container.pid)
    assert usage is not None
    # three million additions take well over 50 ms of CPU on any machine; the sleeping
    # parent itself used a few milliseconds starting up
    assert usage.cpu_seconds > 0.05
    assert usage.memory_bytes > 0


async def test_the_summary_has_kubernetes_shape(container: subprocess.Popen[str]) -> None:
    record = ContainerRecord(
        container_id="process://abc",
        pod_uid="uid-1",
        name="main",
        attempt=0,
        image="python",
        image_id="python@sha256:0",
        started_at=time.time() - 10,
        pid=container.pid,
    )
    pod = {
        "metadata": {"name": "demo", "namespace": "default", "uid": "uid-1"},
        "spec": {"containers": [{"name": "main", "image": "python"}]},
    }
    summary = await NodeStats(node_name="node1", started_at=time.time()).summary(
        [(pod, [record])], simulated=False
    )
    assert summary["node"]["nodeName"] == "node1"
    (stats,) = summary["pods"]
    assert stats["podRef"] == {"name": "demo", "namespace": "default", "uid": "uid-1"}
    (main,) = stats["containers"]
    assert main["name"] == "main"
    assert main["cpu"]["usageCoreNanoSeconds"] > 50_000_000
    assert main["cpu"]["usageNanoCores"] > 0  # the first look: the average since it started
    assert main["memory"]["workingSetBytes"] > 0
    assert summary["node"]["cpu"]["usageCoreNanoSeconds"] == main["cpu"]["usageCoreNanoSeconds"]


async def test_a_simulated_pod_uses_what_it_requests_or_is_told() -> None:
    record = ContainerRecord(
        container_id="sim://abc",
        pod_uid="uid-2",
        name="app",
        attempt=0,
        image="nginx",
        image_id="nginx@sha256:0",
        started_at=time.time(),
    )
    pod = {
        "metadata": {"name": "sim", "namespace": "default", "uid": "uid-2"},
        "spec": {
            "containers": [
                {"name": "app", "resources": {"requests": {"cpu": "250m", "memory": "64Mi"}}}
            ]
        },
    }
    stats = NodeStats(node_name="n", started_at=time.time())
    (container,) = (await stats.summary([(pod, [record])], simulated=True))["pods"][0]["containers"]
    assert container["cpu"]["usageNanoCores"] == 250_000_000
    assert container["memory"]["workingSetBytes"] == 64 * 2**20
    pod["metadata"]["annotations"] = {"kubelite.io/simulated-cpu": "1500m"}
    (container,) = (await stats.summary([(pod, [record])], simulated=True))["pods"][0]["containers"]
    assert container["cpu"]["usageNanoCores"] == 1_500_000_000


async def test_resource_metrics_are_the_summary_in_prometheus_text() -> None:
    record = ContainerRecord(
        container_id="sim://def",
        pod_uid="uid-3",
        name="app",
        attempt=0,
        image="nginx",
        image_id="nginx@sha256:0",
        started_at=time.time() - 30,
    )
    pod = {
        "metadata": {"name": "web", "namespace": "shop", "uid": "uid-3"},
        "spec": {"containers": [{"name": "app", "resources": {"requests": {"memory": "1Mi"}}}]},
    }
    summary = await NodeStats(node_name="n", started_at=time.time()).summary(
        [(pod, [record])], simulated=True
    )
    families = {f.name: f for f in text_string_to_metric_families(resource_metrics(summary))}
    assert set(families) == {
        "container_cpu_usage_seconds",
        "container_memory_working_set_bytes",
        "container_start_time_seconds",
        "node_cpu_usage_seconds",
        "node_memory_working_set_bytes",
        "pod_cpu_usage_seconds",
        "pod_memory_working_set_bytes",
        "resource_scrape_error",
    }  # the parser names a counter without its _total
    (memory,) = families["container_memory_working_set_bytes"].samples
    assert memory.labels == {"container": "app", "namespace": "shop", "pod": "web"}
    assert memory.value == 2**20 and memory.timestamp is not None
    (node_memory,) = families["node_memory_working_set_bytes"].samples
    assert node_memory.labels == {} and node_memory.value == 2**20
    (started,) = families["container_start_time_seconds"].samples
    assert started.value == pytest.approx(record.started_at, abs=1)
