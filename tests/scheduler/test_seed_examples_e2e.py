"""The seed's two scheduling examples, against a real apiserver and a real scheduler process.

1. A pod created with ``spec.nodeName: node1`` runs there and never passes through the
   scheduler (no binding, no Scheduled event from it).
2. ``kubectl label nodes node1 zz=cxk`` and a pod with ``nodeSelector: {zz: cxk}`` lands on
   node1, with the Scheduled event worded as Kubernetes words it.
"""

from __future__ import annotations

import asyncio
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from kubelite.testing import ComponentProcess
from kubelite.testing.metrics import metric
from tests.scheduler.cluster import cluster_at

pytestmark = pytest.mark.e2e


async def test_pod_naming_a_node_skips_the_scheduler(
    api: ComponentProcess, start_scheduler: Callable[..., ComponentProcess]
) -> None:
    sched = start_scheduler()
    async with cluster_at(api.url) as cluster:
        await cluster.add_node("node1")
        await cluster.add_node("node2")
        await cluster.add_pod("pinned", node_name="node1")
        await cluster.add_pod("free")  # the scheduler is alive and binding meanwhile
        await cluster.until(lambda: bool(cluster.node_of("free")), within=20, what="free bound")
        await cluster.until(
            lambda: bool(cluster.pod_events("free", "Scheduled")), within=20, what="Scheduled event"
        )
        assert cluster.node_of("pinned") == "node1"
        assert cluster.pod_events("pinned") == []
        # the scheduler tried exactly one pod: the one without a node
        assert (
            metric(
                sched.url,
                "scheduler_schedule_attempts_total",
                profile="default-scheduler",
                result="scheduled",
            )
            == 1
        )


@pytest.mark.kubectl
@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
async def test_kubectl_label_then_node_selector_lands_on_the_labelled_node(
    api: ComponentProcess, start_scheduler: Callable[..., ComponentProcess], tmp_path: Path
) -> None:
    start_scheduler()
    async with cluster_at(api.url) as cluster:
        await cluster.add_node("node1")
        await cluster.add_node("node2")
        proc = await asyncio.create_subprocess_exec(
            "kubectl", "-s", api.url, "--cache-dir", str(tmp_path / "kube-cache"),
            "label", "nodes", "node1", "zz=cxk",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
        )  # fmt: skip
        out, _ = await proc.communicate()
        assert proc.returncode == 0, out.decode()
        assert out.decode().strip() == "node/node1 labeled"
        for i in range(5):  # several, so a lucky pick cannot pass the test
            await cluster.add_pod(f"pod-example-{i}", node_selector={"zz": "cxk"})
        names = [f"pod-example-{i}" for i in range(5)]
        await cluster.until(
            lambda: all(cluster.node_of(n) for n in names), within=20, what="pods bound"
        )
        assert {cluster.node_of(n) for n in names} == {"node1"}
        await cluster.until(
            lambda: bool(cluster.pod_events("pod-example-0", "Scheduled")), within=20, what="event"
        )
        (event,) = cluster.pod_events("pod-example-0", "Scheduled")
        assert event["type"] == "Normal"
        assert event["message"] == "Successfully assigned default/pod-example-0 to node1"
        assert event["source"]["component"] == "default-scheduler"

        # a selector nothing matches: kubectl describe says why the pod is Pending
        await cluster.add_pod("nowhere", node_selector={"zz": "nope"})
        await cluster.until(
            lambda: bool(cluster.pod_events("nowhere", "FailedScheduling")), within=20, what="event"
        )
        proc = await asyncio.create_subprocess_exec(
            "kubectl", "-s", api.url, "--cache-dir", str(tmp_path / "kube-cache"),
            "describe", "pod", "nowhere",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
        )  # fmt: skip
        out, _ = await proc.communicate()
        text = out.decode()
        assert proc.returncode == 0, text
        assert re.search(r"^Status:\s+Pending$", text, re.MULTILINE), text
        assert re.search(r"^\s+PodScheduled\s+False", text, re.MULTILINE), text
        events = text[text.index("Events:") :]
        assert "Warning  FailedScheduling" in events
        assert (
            "default-scheduler  0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector."
            in events
        )
