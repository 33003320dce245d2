"""StatefulSet pod management against real processes (apiserver, controller-manager, scheduler,
sim kubelets): ``OrderedReady`` creates ``web-1`` only once ``web-0`` is Running and Ready and
scales down from the highest ordinal, one pod at a time; ``Parallel`` creates every pod at once;
each pod has its stable identity; a failed pod is replaced under the same name;
``minReadySeconds`` holds the next ordinal until its predecessor has been ready that long."""

from __future__ import annotations

import pytest

from api.meta import parse_time
from kubelite.testing.waiting import Watcher
from tests import factories
from tests.controller_manager.conftest import Cluster
from tests.controller_manager.harness import EVENTS, PODS, Obj, ready, rt

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(150)]

STATEFULSETS = rt("apps", "StatefulSet")


@pytest.fixture
def cm_args() -> tuple[str, ...]:
    return ("--controllers=statefulset,garbagecollector",)


def running_and_ready(pod: Obj | None) -> bool:
    return pod is not None and pod["status"].get("phase") == "Running" and ready(pod)


def names(pods: list[Obj]) -> set[str]:
    return {p["metadata"]["name"] for p in pods}


def ordinal(pod: Obj) -> int:
    return int(pod["metadata"]["name"].rsplit("-", 1)[1])


async def test_ordered_ready_starts_each_pod_after_its_predecessor_is_ready(
    cluster: Cluster,
) -> None:
    client = cluster.client
    violations: list[str] = []
    pods: Watcher

    def check(type_: str, pod: Obj) -> None:
        """When web-N appears, web-(N-1) must already be Running and Ready: the watch is
        ordered, so the informer holds every earlier change of web-(N-1)."""
        if type_ != "ADDED" or ordinal(pod) == 0:
            return
        previous = pods.get(f"default/web-{ordinal(pod) - 1}")
        if not running_and_ready(previous):
            violations.append(f"{pod['metadata']['name']} created before its predecessor was ready")

    async with (
        Watcher(
            client, PODS, namespace="default", label_selector="app=web", on_event=check
        ) as pods,
        Watcher(client, STATEFULSETS, namespace="default") as sets,
    ):
        await client.create(
            STATEFULSETS, factories.stateful_set("web", replicas=3), namespace="default"
        )
        # No node yet: web-0 stays Pending, and the controller, having seen it, waits.
        await sets.wait_until(
            lambda o: bool(o) and o[0]["status"].get("replicas") == 1,
            what="status counting web-0",
        )
        listed = (await client.list(PODS, namespace="default"))["items"]
        assert names(listed) == {"web-0"}

        await cluster.start_nodes("node1")
        await pods.wait_until(
            lambda o: len(o) == 3 and all(running_and_ready(p) for p in o),
            what="web-0, web-1, web-2 Running and Ready",
        )
        got = await sets.wait_until(
            lambda o: o[0]["status"].get("readyReplicas") == 3, what="status of 3 ready"
        )
    assert violations == []
    status = got[0]["status"]
    assert status["replicas"] == 3 and status["availableReplicas"] == 3
    assert status["currentRevision"] == status["updateRevision"]
    assert status["currentReplicas"] == status["updatedReplicas"] == 3
    assert status["observedGeneration"] == 1
    assert status["collisionCount"] == 0

    for pod in pods.objects():
        name, meta, spec = pod["metadata"]["name"], pod["metadata"], pod["spec"]
        assert meta["labels"]["statefulset.kubernetes.io/pod-name"] == name
        assert meta["labels"]["apps.kubernetes.io/pod-index"] == str(ordinal(pod))
        assert meta["labels"]["controller-revision-hash"] == status["updateRevision"]
        assert spec["hostname"] == name and spec["subdomain"] == "web"
        assert meta["ownerReferences"][0]["kind"] == "StatefulSet"

    events = (await client.list(EVENTS, namespace="default"))["items"]
    messages = [e["message"] for e in events if e["reason"] == "SuccessfulCreate"]
    assert sorted(messages) == [
        f"create Pod web-{i} in StatefulSet web successful" for i in range(3)
    ]
    assert {
        e["source"]["component"] for e in events if e["involvedObject"]["kind"] == "StatefulSet"
    } == {"statefulset-controller"}


async def test_parallel_creates_every_pod_at_once(cluster: Cluster) -> None:
    client = cluster.client
    body = factories.stateful_set("web", replicas=3, podManagementPolicy="Parallel")
    async with Watcher(client, PODS, namespace="default") as pods:
        await client.create(STATEFULSETS, body, namespace="default")
        # No node: none of them can become ready, so all three exist only if nobody waited.
        got = await pods.wait_until(lambda o: len(o) == 3, what="3 pods without any ready")
    assert names(got) == {"web-0", "web-1", "web-2"}
    assert not any(ready(p) for p in got)


async def test_scale_down_removes_the_highest_ordinal_first_one_at_a_time(cluster: Cluster) -> None:
    client = cluster.client
    await cluster.start_nodes("node1")
    order: list[str] = []
    violations: list[str] = []
    pods: Watcher

    def check(type_: str, pod: Obj) -> None:
        name = pod["metadata"]["name"]
        if pod["metadata"].get("deletionTimestamp") and name not in order:
            order.append(name)
            higher = [p for p in pods.objects() if ordinal(p) > ordinal(pod)]
            if higher:
                violations.append(f"{name} deleted while {names(higher)} still existed")

    async with (
        Watcher(
            client, PODS, namespace="default", label_selector="app=web", on_event=check
        ) as pods,
    ):
        await client.create(
            STATEFULSETS, factories.stateful_set("web", replicas=3), namespace="default"
        )
        await pods.wait_until(
            lambda o: len(o) == 3 and all(running_and_ready(p) for p in o), what="3 ready pods"
        )
        # what ``kubectl scale sts web --replicas=1`` sends
        await client.patch(
            STATEFULSETS, "web", {"spec": {"replicas": 1}}, namespace="default", subresource="scale"
        )
        await pods.wait_until(lambda o: names(o) == {"web-0"}, what="only web-0 left")
    assert order == ["web-2", "web-1"]
    assert violations == []
    events = (await client.list(EVENTS, namespace="default"))["items"]
    deleted = [e["message"] for e in events if e["reason"] == "SuccessfulDelete"]
    assert sorted(deleted) == [f"delete Pod web-{i} in StatefulSet web successful" for i in (1, 2)]


async def test_a_failed_pod_is_replaced_under_its_name(cluster: Cluster) -> None:
    client = cluster.client
    kubelet = (await cluster.start_nodes("node1"))["node1"]
    async with Watcher(client, PODS, namespace="default", label_selector="app=web") as pods:
        await client.create(
            STATEFULSETS, factories.stateful_set("web", replicas=2), namespace="default"
        )
        got = await pods.wait_until(
            lambda o: len(o) == 2 and all(running_and_ready(p) for p in o), what="2 ready pods"
        )
        old_uid = next(p["metadata"]["uid"] for p in got if p["metadata"]["name"] == "web-1")
        # A pod fails for good when its node gives up on it (an eviction, a shutdown); with
        # the kubelet stopped nothing reports it running again.
        kubelet.kill()
        pod = await client.get(PODS, "web-1", namespace="default")
        pod["status"]["phase"] = "Failed"
        await client.update_status(PODS, pod)

        def replaced(_o: list[Obj]) -> bool:
            web1 = pods.get("default/web-1")
            return web1 is not None and web1["metadata"]["uid"] != old_uid

        # a terminal pod's deletion needs no kubelet: the new web-1 is made at once
        await pods.wait_until(replaced, what="a new web-1")
        kubelet.start()
        await pods.wait_until(
            lambda _o: replaced(_o) and running_and_ready(pods.get("default/web-1")),
            what="the new web-1 Running and Ready",
        )


async def test_min_ready_seconds_holds_the_next_ordinal_until_available(cluster: Cluster) -> None:
    client = cluster.client
    await cluster.start_nodes("node1")
    body = factories.stateful_set("web", replicas=2, minReadySeconds=2)
    async with Watcher(client, PODS, namespace="default", label_selector="app=web") as pods:
        await client.create(STATEFULSETS, body, namespace="default")
        got = await pods.wait_until(
            lambda o: len(o) == 2 and all(running_and_ready(p) for p in o), what="2 ready pods"
        )
    web0, web1 = sorted(got, key=ordinal)
    became_ready = next(
        c["lastTransitionTime"] for c in web0["status"]["conditions"] if c["type"] == "Ready"
    )
    # both stamps come from the apiserver's clock, in whole seconds
    waited = parse_time(web1["metadata"]["creationTimestamp"]) - parse_time(became_ready)
    assert waited.total_seconds() >= 2
