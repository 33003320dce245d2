"""An autoscaler scales a Deployment up under load, holds through the stabilisation window, then
scales it down — with the window passing in virtual time.

Real apiserver, scheduler, controller-manager and sim-kubelet processes; the autoscaler runs in
the test process on a ``ManualClock`` (``conftest.autoscaler``). The sim kubelet reports each
container using its pod's ``kubelite.io/simulated-cpu``; the Deployment's pods request 200m
and "use" 400m — 200% of the request against a 50% target — so Kubernetes' algorithm asks
for ``ceil(1 × 200/50) = 4`` replicas. Then the pods' load drops to 20m (10%): the autoscaler
wants one replica at once, but the highest recommendation of the last five minutes is still 4,
so it holds (``ScaleDownStabilized``) until the clock passes the window.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest

from api.registry import REGISTRY
from kubelite.testing.waiting import WITHIN, Watcher, apoll_until
from services.controller_manager.clock import ManualClock
from services.controller_manager.horizontal_pod_autoscaler import SYNC_PERIOD
from services.controller_manager.hpa_behavior import DOWNSCALE_WINDOW
from services.controller_manager.replica_calculator import CPU_INITIALIZATION_PERIOD
from services.kubelet.stats import SIMULATED_CPU
from tests import factories
from tests.autoscaling.conftest import SimCluster

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

Obj = dict[str, Any]
HPAS = REGISTRY.require("autoscaling", "HorizontalPodAutoscaler")
DEPLOYMENTS = REGISTRY.require("apps", "Deployment")
PODS = REGISTRY.require("", "Pod")
EVENTS = REGISTRY.require("", "Event")


def busy_web() -> Obj:
    body = factories.deployment("web", replicas=1)
    template = body["spec"]["template"]
    template["metadata"]["annotations"] = {SIMULATED_CPU: "400m"}
    template["spec"]["containers"] = [factories.container("app", "nginx", cpu="200m")]
    return body


HPA = factories.horizontal_pod_autoscaler(
    "web", target="web", minReplicas=1, metrics=[factories.cpu_utilization(50)]
)


def ready(pod: Obj) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (pod.get("status") or {}).get("conditions") or []
    )


def first(objects: list[Obj]) -> Obj:
    return objects[0] if objects else {}


def condition(hpa: Obj | None, kind: str) -> Obj:
    conditions = ((hpa or {}).get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c["type"] == kind), {})


async def measured(c: SimCluster, *, pods: int, cpu: str) -> None:
    """Until ``metrics.k8s.io`` reports ``pods`` web pods, each using ``cpu``."""

    async def reported() -> bool:
        listed = await c.client.request(
            "GET",
            "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods",
            params={"labelSelector": "app=web"},
        )
        usage = [i["containers"][0]["usage"]["cpu"] for i in listed["items"]]
        return len(usage) == pods and all(u == cpu for u in usage)

    await apoll_until(reported, what=f"{pods} web pod(s) measured at {cpu}")


async def synced(clock: ManualClock) -> None:
    """The autoscaler has finished a look and set its next one."""
    await asyncio.wait_for(clock.timers_pending.wait(), WITHIN)


async def test_scales_up_under_load_and_down_after_the_window(
    sim_cluster: SimCluster, autoscaler: ManualClock
) -> None:
    client, clock = sim_cluster.client, autoscaler
    async with (
        Watcher(client, DEPLOYMENTS, namespace="default") as deployments,
        Watcher(client, HPAS, namespace="default") as hpas,
        Watcher(client, PODS, namespace="default") as pods,
        Watcher(client, EVENTS, namespace="default") as events,
    ):
        await client.create(DEPLOYMENTS, busy_web(), namespace="default")
        await pods.wait_until(lambda o: len(o) == 1 and ready(o[0]), what="one web pod Ready")
        await measured(sim_cluster, pods=1, cpu="400000000n")
        await client.create(HPAS, HPA, namespace="default")
        await synced(clock)  # the autoscaler first looks one sync period after it appears

        # past the pods' CPU initialisation period, so the first look counts them as ready
        clock.advance((CPU_INITIALIZATION_PERIOD + timedelta(seconds=SYNC_PERIOD)).total_seconds())
        await deployments.wait_until(
            lambda o: first(o).get("spec", {}).get("replicas") == 4, what="web scaled to 4"
        )
        up = await hpas.wait_until(
            lambda o: (first(o).get("status") or {}).get("desiredReplicas") == 4,
            what="the autoscaler's status says 4",
        )
        status = up[0]["status"]
        assert status["currentMetrics"] == [
            {
                "type": "Resource",
                "resource": {
                    "name": "cpu",
                    "current": {"averageValue": "400m", "averageUtilization": 200},
                },
            }
        ]
        assert condition(up[0], "ScalingActive")["reason"] == "ValidMetricFound"
        assert condition(up[0], "AbleToScale")["reason"] == "SucceededRescale"

        # the load drops
        await pods.wait_until(
            lambda o: len(o) == 4 and all(ready(p) for p in o), what="four web pods Ready"
        )
        for pod in pods.objects():
            await client.patch(
                PODS,
                pod["metadata"]["name"],
                {"metadata": {"annotations": {SIMULATED_CPU: "20m"}}},
                namespace="default",
            )
        await measured(sim_cluster, pods=4, cpu="20000000n")
        await synced(clock)
        clock.advance_to_next()  # a look within the window: it holds at 4
        held = await hpas.wait_until(
            lambda o: condition(first(o), "AbleToScale").get("reason") == "ScaleDownStabilized",
            what="the scale-down held by the stabilisation window",
        )
        assert held[0]["status"]["currentMetrics"][0]["resource"]["current"] == {
            "averageValue": "20m",
            "averageUtilization": 10,
        }
        current = await client.get(DEPLOYMENTS, "web", namespace="default")
        assert current["spec"]["replicas"] == 4

        await synced(clock)
        clock.advance(DOWNSCALE_WINDOW.total_seconds())  # the next look is past the window
        await deployments.wait_until(
            lambda o: first(o).get("spec", {}).get("replicas") == 1, what="web scaled back to 1"
        )
        await events.wait_until(
            lambda o: (
                sorted(e["message"] for e in o if e["reason"] == "SuccessfulRescale")
                == [
                    "New size: 1; reason: All metrics below target",
                    "New size: 4; reason: cpu resource utilization (percentage of request) above target",
                ]
            ),
            what="a SuccessfulRescale event for each scaling",
        )


async def test_pods_without_a_cpu_request_leave_the_target_alone(
    sim_cluster: SimCluster, autoscaler: ManualClock
) -> None:
    """Utilisation is a share of the request: with none, Kubernetes' autoscaler says why in
    events and its ``ScalingActive`` condition, and changes nothing."""
    client, clock = sim_cluster.client, autoscaler
    body = busy_web()
    del body["spec"]["template"]["spec"]["containers"][0]["resources"]
    async with (
        Watcher(client, HPAS, namespace="default") as hpas,
        Watcher(client, PODS, namespace="default") as pods,
        Watcher(client, EVENTS, namespace="default") as events,
    ):
        await client.create(DEPLOYMENTS, body, namespace="default")
        await pods.wait_until(lambda o: len(o) == 1 and ready(o[0]), what="one web pod Ready")
        await measured(sim_cluster, pods=1, cpu="400000000n")
        await client.create(HPAS, HPA, namespace="default")
        await synced(clock)
        clock.advance((CPU_INITIALIZATION_PERIOD + timedelta(seconds=SYNC_PERIOD)).total_seconds())
        refused = await hpas.wait_until(
            lambda o: condition(first(o), "ScalingActive").get("status") == "False",
            what="ScalingActive False",
        )
        await events.wait_until(
            lambda o: (
                {e["reason"] for e in o if e["type"] == "Warning"}
                >= {"FailedGetResourceMetric", "FailedComputeMetricsReplicas"}
            ),
            what="the autoscaler's warnings",
        )
        pod = pods.objects()[0]["metadata"]["name"]
    active = condition(refused[0], "ScalingActive")
    assert (active["reason"], active["message"]) == (
        "FailedGetResourceMetric",
        f"the HPA was unable to compute the replica count: "
        f"missing request for cpu in container app of Pod {pod}",
    )
    assert (await client.get(DEPLOYMENTS, "web", namespace="default"))["spec"]["replicas"] == 1
