"""The seed's whole pod-creation flow, with every component a separate process.

An RC of 3 nginx pods: the controller-manager creates 3 pods, the scheduler binds them across
node1 and node2, the kubelets run them — all Running, each pod IP answering HTTP, each pod's
log readable through the apiserver. Scale to 5:
5 Running. Change the image: each pod's container restarts with the new image. Delete the RC:
its pods, and their processes, are gone.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

import pytest

from tests.e2e.cluster import PODS, RCS, Cluster, http_get, running
from tests.factories import nginx_rc

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(240)]

Obj = dict[str, Any]


def image_of(pod: Obj) -> str:
    statuses = (pod.get("status") or {}).get("containerStatuses") or [{}]
    return str(statuses[0].get("image") or "")


def all_running(c: Cluster, app: str, count: int, *, image: str | None = None) -> bool:
    pods = c.live_pods(label=f"app={app}")
    return (
        len(pods) == count
        and all(running(p) for p in pods)
        and (
            image is None
            or all(
                image_of(p) == image and p["spec"]["containers"][0]["image"] == image for p in pods
            )
        )
    )


async def assert_serving(c: Cluster, app: str) -> None:
    pods = c.live_pods(label=f"app={app}")
    answers = await asyncio.gather(*(http_get(f"http://{p['status']['podIP']}:80/") for p in pods))
    assert [status for status, _ in answers] == [200] * len(pods)
    assert all("nginx" in body.lower() for _, body in answers)


def assert_one_process_per_pod(c: Cluster, app: str) -> None:
    names = {f"default/{p['metadata']['name']}" for p in c.live_pods(label=f"app={app}")}
    groups = c.pod_processes()
    assert set(groups) == names, (sorted(groups), sorted(names))
    assert all(len(pgids) == 1 for pgids in groups.values()), groups


async def test_rc_of_nginx_pods_runs_scales_changes_image_and_goes_away(cluster: Cluster) -> None:
    c = cluster
    await c.client.create(RCS, nginx_rc("web", replicas=3), namespace="default")
    await c.until(lambda: all_running(c, "web", 3), within=60, what="3 web pods Running")
    pods = c.live_pods(label="app=web")
    assert all(p["metadata"]["ownerReferences"][0]["name"] == "web" for p in pods)
    assert {p["spec"]["nodeName"] for p in pods} == {"node1", "node2"}  # spread across nodes
    assert len({p["status"]["podIP"] for p in pods}) == 3
    await assert_serving(c, "web")
    assert_one_process_per_pod(c, "web")
    # `kubectl logs`: the apiserver proxies pods/{name}/log to the pod's kubelet
    first = pods[0]["metadata"]["name"]
    status, log = await http_get(f"{c.server}/api/v1/namespaces/default/pods/{first}/log")
    assert status == 200 and f"start worker processes on {pods[0]['status']['podIP']}:80" in log

    # scale to 5, as `kubectl scale rc web --replicas=5` does
    await c.client.patch(RCS, "web", {"spec": {"replicas": 5}}, namespace="default")
    await c.until(lambda: all_running(c, "web", 5), within=60, what="5 web pods Running")
    await c.until(
        lambda: (c.rcs.get("default/web") or {}).get("status", {}).get("readyReplicas") == 5,
        within=30,
        what="the RC's status to count 5 ready replicas",
    )
    await assert_serving(c, "web")
    assert_one_process_per_pod(c, "web")

    # change the image: the RC's template for pods to come, and each pod's container (pods
    # allow an image change in place; the kubelet restarts the container with the new image)
    before = {p["metadata"]["uid"]: p for p in c.live_pods(label="app=web")}
    new_image = "nginx:1.28"
    await c.client.patch(
        RCS,
        "web",
        {"spec": {"template": {"spec": {"containers": [{"name": "nginx", "image": new_image}]}}}},
        namespace="default",
        patch_type="strategic",
    )
    for pod in before.values():
        await c.client.patch(
            PODS,
            pod["metadata"]["name"],
            {"spec": {"containers": [{"name": "nginx", "image": new_image}]}},
            namespace="default",
            patch_type="strategic",
        )
    await c.until(
        lambda: (
            all_running(c, "web", 5, image=new_image)
            and all(
                (p["status"]["containerStatuses"][0].get("restartCount") or 0) >= 1
                for p in c.live_pods(label="app=web")
            )
        ),
        within=90,
        what="every web pod restarted with the new image",
    )
    after = c.live_pods(label="app=web")
    assert {p["metadata"]["uid"] for p in after} == set(before)  # same pods, restarted in place
    await assert_serving(c, "web")
    assert_one_process_per_pod(c, "web")
    pids = {pgid for groups in c.pod_processes().values() for pgid in groups}

    # delete the RC as kubectl does (background propagation): pods and processes go with it
    await c.client.delete(RCS, "web", namespace="default", propagation_policy="Background")
    await c.until(
        lambda: not c.pods.list() and c.rcs.get("default/web") is None,
        within=90,
        what="the RC and all its pods gone",
    )
    assert not c.pod_processes()
    for pgid in pids:
        with pytest.raises(ProcessLookupError):
            os.killpg(pgid, 0)
