"""``kubectl drain`` waits for a PodDisruptionBudget, as on a real cluster, then finishes.

A whole cluster of real processes (``kubelite up``'s command lines, two process-runtime
kubelets): Deployment ``web`` runs its 2 pods on node1 (node2 is cordoned while they start),
and a budget says 2 must stay available. Draining node1 evicts through ``pods/eviction``;
the disruption controller's status allows nothing, so the apiserver answers 429 and kubectl
keeps retrying every 5 s (no pod is marked ``DisruptionTarget`` meanwhile). Scaling the Deployment to 4 puts two more pods on node2 (node1 is
cordoned by the drain); once they are Ready the budget allows 2 disruptions, both evictions
go through (each pod marked ``DisruptionTarget`` / ``EvictionByEvictionAPI`` first) and the
drain ends with node1 empty of web pods.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s

from api.registry import REGISTRY
from kubelite.testing.waiting import WITHIN, Watcher
from tests.e2e.cluster import Cluster
from tests.factories import container, deployment, pod_template
from tests.kubectl.harness import Kubectl

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(300)]

Obj = dict[str, Any]

PDBS = REGISTRY.require("policy", "PodDisruptionBudget")
DISRUPTION_TARGET = ("DisruptionTarget", "True", "EvictionByEvictionAPI")
VIOLATES = "Cannot evict pod as it would violate the pod's disruption budget."
DRAIN_WITHIN = 180.0
"""The whole drain: a few 5 s retries, two replacements starting, two pods stopping."""


def ready(pod: Obj) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (pod.get("status") or {}).get("conditions") or []
    )


def web_pods_on(cluster: Cluster, node: str) -> list[Obj]:
    return [p for p in cluster.live_pods(label="app=web") if p["spec"].get("nodeName") == node]


def web() -> Obj:
    """Deployment ``web``: 2 nginx pods that stop within 5 s."""
    nginx = container("nginx", "nginx", ports=[{"containerPort": 80}])
    template = pod_template({"app": "web"}, nginx, terminationGracePeriodSeconds=5)
    return deployment("web", replicas=2, template=template)


async def budget_settles(cluster: Cluster, *, allowed: int, healthy: int) -> Obj:
    """Await budget ``web``'s status, observed at its generation, saying this."""
    async with Watcher(cluster.client, PDBS, namespace="default") as budgets:

        def says(_objects: list[Obj]) -> bool:
            budget = budgets.get("default/web") or {}
            status = budget.get("status") or {}
            return (
                status.get("observedGeneration", 0) >= budget["metadata"]["generation"]
                and status.get("disruptionsAllowed") == allowed
                and status.get("currentHealthy") == healthy
            )

        await budgets.wait_until(says, what=f"budget web: {allowed} allowed of {healthy} healthy")
        return dict((budgets.get("default/web") or {})["status"])


def official_client_reads_budget_status(server: str) -> k8s.V1PodDisruptionBudget:
    with k8s.ApiClient(k8s.Configuration(host=server)) as api_client:
        policy = k8s.PolicyV1Api(api_client)
        budget: k8s.V1PodDisruptionBudget = policy.read_namespaced_pod_disruption_budget_status(
            "web", "default"
        )
        return budget


async def test_drain_waits_for_the_budget_then_finishes(cluster: Cluster, tmp_path: Path) -> None:
    kubectl = Kubectl.on(cluster.server, workdir=tmp_path)
    kubectl("cordon", "node2")
    kubectl.apply(web())
    await cluster.until(
        lambda: len([p for p in web_pods_on(cluster, "node1") if ready(p)]) == 2,
        within=WITHIN,
        what="both web pods Ready on node1",
    )
    kubectl("uncordon", "node2")
    kubectl("create", "poddisruptionbudget", "web", "--selector=app=web", "--min-available=2")
    await budget_settles(cluster, allowed=0, healthy=2)
    header, row = kubectl("get", "pdb", "web").stdout.splitlines()
    assert header.split() == ["NAME", "MIN", "AVAILABLE", "MAX", "UNAVAILABLE", "ALLOWED",
                              "DISRUPTIONS", "AGE"]  # fmt: skip
    assert row.split()[:4] == ["web", "2", "N/A", "0"]

    drain = await asyncio.create_subprocess_exec(
        kubectl.binary,
        f"--server={kubectl.server}",
        f"--cache-dir={kubectl.cache_dir}",
        "drain",
        "node1",
        "--ignore-daemonsets",
        "--delete-emptydir-data",
        f"--timeout={int(DRAIN_WITHIN)}s",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        env=kubectl.env(),
        cwd=kubectl.workdir,
    )
    output: list[str] = []
    held = asyncio.Event()

    async def read_output() -> None:
        assert drain.stdout is not None
        async for raw in drain.stdout:
            line = raw.decode().rstrip("\n")
            output.append(line)
            if "(will retry after 5s): " + VIOLATES in line:
                held.set()

    targeted: set[str] = set()  # pods seen carrying the condition evictions add

    def note_target(pod: Obj) -> None:
        for c in (pod.get("status") or {}).get("conditions") or []:
            if (c.get("type"), c.get("status"), c.get("reason")) == DISRUPTION_TARGET:
                targeted.add(pod["metadata"]["name"])

    cluster.pods.add_handler(on_update=lambda _old, new: note_target(new))
    evicted = {p["metadata"]["name"] for p in web_pods_on(cluster, "node1")}
    reader = asyncio.create_task(read_output(), name="kubectl drain output")
    try:
        await asyncio.wait_for(held.wait(), WITHIN)
        # held: both pods still on node1, the node cordoned
        assert len(web_pods_on(cluster, "node1")) == 2
        assert not targeted
        node1 = await cluster.client.get(REGISTRY.require("", "Node"), "node1")
        assert node1["spec"].get("unschedulable") is True

        kubectl("scale", "deployment", "web", "--replicas=4")
        code = await asyncio.wait_for(drain.wait(), DRAIN_WITHIN)
        await reader
    finally:
        if drain.returncode is None:
            drain.kill()
            await drain.wait()
        reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await reader
    text = "\n".join(output)
    assert code == 0, text
    assert "node/node1 drained" in text
    assert any(line.startswith('error when evicting pods/"web-') for line in output), text

    await cluster.until(
        lambda: (
            not web_pods_on(cluster, "node1")
            and len([p for p in web_pods_on(cluster, "node2") if ready(p)]) == 4
        ),
        within=WITHIN,
        what="4 Ready web pods, all on node2",
    )
    assert targeted == evicted  # each evicted pod got DisruptionTarget before it went
    status = await budget_settles(cluster, allowed=2, healthy=4)
    assert (status["desiredHealthy"], status["expectedPods"]) == (2, 4)

    budget = await asyncio.to_thread(official_client_reads_budget_status, cluster.server)
    assert budget.status.disruptions_allowed == 2
    assert budget.status.current_healthy == 4
    assert budget.status.observed_generation == budget.metadata.generation
    [condition] = budget.status.conditions
    assert (condition.type, condition.status, condition.reason) == (
        "DisruptionAllowed",
        "True",
        "SufficientPods",
    )
