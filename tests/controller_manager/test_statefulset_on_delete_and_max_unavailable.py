"""StatefulSet update strategies against real processes (apiserver, controller-manager,
scheduler, sim kubelets): ``OnDelete`` replaces only the pods the user deletes; a
``Parallel`` RollingUpdate with ``maxUnavailable: 2`` over ordinals starting at 10 takes two
pods down at a time, highest ordinals first, never more, and updates them all."""

from __future__ import annotations

import pytest

from kubelite.testing.waiting import Watcher
from tests import factories
from tests.controller_manager.conftest import Cluster
from tests.controller_manager.harness import PODS, Obj, ready, rt

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(150)]

STATEFULSETS = rt("apps", "StatefulSet")
HOLD = "kubelite.test/hold"


@pytest.fixture
def cm_args() -> tuple[str, ...]:
    return ("--controllers=statefulset,garbagecollector",)


def healthy(pod: Obj | None) -> bool:
    return (
        pod is not None
        and not pod["metadata"].get("deletionTimestamp")
        and pod["status"].get("phase") == "Running"
        and ready(pod)
    )


def images(pods: list[Obj]) -> dict[str, str]:
    return {
        p["metadata"]["name"]: p["spec"]["containers"][0]["image"]
        for p in pods
        if not p["metadata"].get("deletionTimestamp")
    }


async def set_image(cluster: Cluster, image: str) -> None:
    patch = {"spec": {"template": {"spec": {"containers": [{"name": "app", "image": image}]}}}}
    await cluster.client.patch(
        STATEFULSETS, "web", patch, namespace="default", patch_type="strategic"
    )


async def test_on_delete_replaces_only_deleted_pods(cluster: Cluster) -> None:
    client = cluster.client
    await cluster.start_nodes("node1")
    body = factories.stateful_set("web", replicas=2, updateStrategy={"type": "OnDelete"})
    async with (
        Watcher(client, PODS, namespace="default", label_selector="app=web") as pods,
        Watcher(client, STATEFULSETS, namespace="default") as sets,
    ):
        await client.create(STATEFULSETS, body, namespace="default")
        await pods.wait_until(
            lambda o: len(o) == 2 and all(healthy(p) for p in o), what="2 ready pods"
        )
        await set_image(cluster, "busybox")
        got = await sets.wait_until(
            lambda o: o[0]["status"].get("observedGeneration") == 2, what="generation 2 observed"
        )
        status = got[0]["status"]
        assert status["updateRevision"] != status["currentRevision"]
        # the controller has seen the new template and left the pods alone
        listed = (await client.list(PODS, namespace="default"))["items"]
        assert images(listed) == {"web-0": "nginx", "web-1": "nginx"}

        await client.delete(PODS, "web-1", namespace="default")
        await pods.wait_until(
            lambda o: (
                images(o) == {"web-0": "nginx", "web-1": "busybox"} and all(healthy(p) for p in o)
            ),
            what="a new web-1 on busybox beside the old web-0",
        )
        got = await sets.wait_until(
            lambda o: o[0]["status"].get("updatedReplicas") == 1, what="1 updated replica"
        )
        assert got[0]["status"]["currentReplicas"] == 1


def terminating(pods: list[Obj]) -> set[str]:
    return {p["metadata"]["name"] for p in pods if p["metadata"].get("deletionTimestamp")}


async def test_parallel_rolling_update_takes_max_unavailable_pods_at_a_time(
    cluster: Cluster,
) -> None:
    client = cluster.client
    await cluster.start_nodes("node1")
    body = factories.stateful_set(
        "web",
        replicas=4,
        podManagementPolicy="Parallel",
        ordinals={"start": 10},
        updateStrategy={"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 2}},
    )
    # A finalizer holds each deleted pod in Terminating until the test lets it go, so the
    # pods the controller takes down at once can be seen together.
    body["spec"]["template"]["metadata"]["finalizers"] = [HOLD]
    names = {f"web-{i}" for i in range(10, 14)}
    worst = {"down": 0}
    armed = {"on": False}
    pods: Watcher

    def check(_type: str, _pod: Obj) -> None:
        if armed["on"]:
            down = sum(1 for n in names if not healthy(pods.get(f"default/{n}")))
            worst["down"] = max(worst["down"], down)

    async def release(*held: str) -> None:
        for name in held:
            patch = {"metadata": {"finalizers": None}}
            await client.patch(PODS, name, patch, namespace="default")

    async with (
        Watcher(
            client, PODS, namespace="default", label_selector="app=web", on_event=check
        ) as pods,
    ):
        await client.create(STATEFULSETS, body, namespace="default")
        got = await pods.wait_until(
            lambda o: len(o) == 4 and all(healthy(p) for p in o), what="4 ready pods"
        )
        assert set(images(got)) == names
        armed["on"] = True
        await set_image(cluster, "busybox")
        await pods.wait_until(
            lambda o: terminating(o) == {"web-13", "web-12"}, what="the two highest terminating"
        )
        await release("web-13", "web-12")
        await pods.wait_until(
            lambda o: terminating(o) == {"web-11", "web-10"}, what="then the two lowest"
        )
        assert images(pods.objects()) == {"web-12": "busybox", "web-13": "busybox"}
        await release("web-11", "web-10")
        await pods.wait_until(
            lambda o: images(o) == dict.fromkeys(names, "busybox") and all(healthy(p) for p in o),
            what="every pod on busybox and ready",
        )
        await release(*names)
    assert worst["down"] == 2
