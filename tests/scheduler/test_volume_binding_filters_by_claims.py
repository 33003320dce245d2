"""VolumeBinding's PreFilter, Filter and Reserve over a fed VolumeCache: where a pod's claims let
it go, and in Kubernetes' words when they do not."""

from __future__ import annotations

from typing import Any

import pytest

from api.storage import LOCAL_PATH_ROOT_ANNOTATION, SELECTED_NODE_ANNOTATION
from services.scheduler.config import SchedulerConfig, build_framework
from services.scheduler.framework import FitError, Framework, Handle
from services.scheduler.nodeinfo import NodeInfo, PodInfo
from services.scheduler.volumes import VolumeCache
from tests.factories import (
    node_info,
    persistent_volume,
    persistent_volume_claim,
    pod_info,
    storage_class,
)

WAIT = "WaitForFirstConsumer"


def with_claims(*names: str) -> PodInfo:
    volumes = [{"name": n, "persistentVolumeClaim": {"claimName": n}} for n in names]
    return pod_info("p", volumes=volumes)


def bound(claim: dict[str, Any], volume: str) -> dict[str, Any]:
    claim["spec"]["volumeName"] = volume
    claim["status"] = {"phase": "Bound"}
    return claim


def available(pv: dict[str, Any]) -> dict[str, Any]:
    pv["status"] = {"phase": "Available"}
    return pv


def annotated(obj: dict[str, Any], **annotations: str) -> dict[str, Any]:
    obj["metadata"]["annotations"] = annotations
    return obj


@pytest.fixture
def volumes() -> VolumeCache:
    cache = VolumeCache()
    cache.set_class(storage_class("manual", provisioner="kubernetes.io/no-provisioner",
                                  binding_mode=WAIT))  # fmt: skip
    cache.set_class(storage_class("local-path", provisioner="kubelite.io/local-path",
                                  binding_mode=WAIT))  # fmt: skip
    cache.set_class(storage_class("fast", provisioner="example.com/fast"))
    return cache


@pytest.fixture
def framework(volumes: VolumeCache) -> Framework:
    return build_framework(SchedulerConfig(), handle=Handle(volumes=volumes))


NODES = [
    node_info("node1", annotations={LOCAL_PATH_ROOT_ANNOTATION: "/var/local/node1"}),
    node_info("node2"),
]


def place(framework: Framework, pod: PodInfo, nodes: list[NodeInfo] = NODES) -> str:
    return framework.schedule(pod, nodes).node


def refusal(framework: Framework, pod: PodInfo, nodes: list[NodeInfo] = NODES) -> str:
    with pytest.raises(FitError) as err:
        framework.schedule(pod, nodes)
    assert err.value.unresolvable
    return str(err.value)


def test_a_missing_claim_fails_every_node_naming_it(framework: Framework) -> None:
    assert refusal(framework, with_claims("data")) == (
        '0/2 nodes are available: persistentvolumeclaim "data" not found.'
    )


def test_a_claim_being_deleted_fails_every_node(framework: Framework, volumes: VolumeCache) -> None:
    claim = bound(persistent_volume_claim("data"), "pv1")
    claim["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    volumes.set_claim(claim)
    assert refusal(framework, with_claims("data")) == (
        '0/2 nodes are available: persistentvolumeclaim "data" is being deleted.'
    )


def test_an_unbound_immediate_claim_fails_every_node(
    framework: Framework, volumes: VolumeCache
) -> None:
    volumes.set_claim(persistent_volume_claim("data", storage_class="fast"))
    assert refusal(framework, with_claims("data")) == (
        "0/2 nodes are available: pod has unbound immediate PersistentVolumeClaims."
    )


def test_a_bound_volume_s_node_affinity_decides_the_node(
    framework: Framework, volumes: VolumeCache
) -> None:
    volumes.set_claim(bound(persistent_volume_claim("data", storage_class="manual"), "pv1"))
    volumes.set_volume(persistent_volume("pv1", storage_class="manual",
                                         node_affinity={"kubernetes.io/hostname": ["node2"]}))  # fmt: skip
    assert place(framework, with_claims("data")) == "node2"
    assert refusal(framework, with_claims("data"), NODES[:1]) == (
        "0/1 nodes are available: 1 node(s) had volume node affinity conflict."
    )


def test_a_claim_bound_to_a_missing_volume_fits_nowhere(
    framework: Framework, volumes: VolumeCache
) -> None:
    volumes.set_claim(bound(persistent_volume_claim("data", storage_class="manual"), "gone"))
    assert refusal(framework, with_claims("data")) == (
        "0/2 nodes are available: 2 node(s) unavailable due to one or more pvc(s) bound to "
        "non-existent pv(s)."
    )


def test_a_waiting_claim_goes_where_an_available_volume_fits(
    framework: Framework, volumes: VolumeCache
) -> None:
    volumes.set_claim(persistent_volume_claim("data", storage="2Gi", storage_class="manual"))
    on = {"kubernetes.io/hostname": ["node1"]}
    volumes.set_volume(available(persistent_volume("small", storage="1Gi", storage_class="manual",
                                                   node_affinity=on)))  # fmt: skip
    volumes.set_volume(available(persistent_volume("ro", storage="5Gi", storage_class="manual",
                                                   access_modes=("ReadOnlyMany",),
                                                   node_affinity=on)))  # fmt: skip
    released = persistent_volume("released", storage="5Gi", storage_class="manual",
                                 node_affinity=on)  # fmt: skip
    released["status"] = {"phase": "Released"}
    volumes.set_volume(released)
    assert refusal(framework, with_claims("data")) == (
        "0/2 nodes are available: 2 node(s) didn't find available persistent volumes to bind."
    )
    volumes.set_volume(available(persistent_volume("fits", storage="3Gi", storage_class="manual",
                                 node_affinity={"kubernetes.io/hostname": ["node2"]})))  # fmt: skip
    assert place(framework, with_claims("data")) == "node2"


def test_local_path_provisions_only_on_nodes_that_publish_their_root(
    framework: Framework, volumes: VolumeCache
) -> None:
    volumes.set_claim(persistent_volume_claim("data", storage_class="local-path"))
    assert place(framework, with_claims("data")) == "node1"
    assert refusal(framework, with_claims("data"), NODES[1:]) == (
        "0/1 nodes are available: 1 node(s) didn't find available persistent volumes to bind."
    )


def test_a_claim_with_a_selected_node_holds_the_pod_there(
    framework: Framework, volumes: VolumeCache
) -> None:
    claim = persistent_volume_claim("data", storage_class="local-path")
    volumes.set_claim(annotated(claim, **{SELECTED_NODE_ANNOTATION: "node2"}))
    nodes = [node_info(n, annotations={LOCAL_PATH_ROOT_ANNOTATION: "/r"}) for n in ("a", "node2")]
    assert place(framework, with_claims("data"), nodes) == "node2"


def test_reserve_holds_a_shared_claim_to_the_first_pod_s_node_until_unreserved(
    framework: Framework, volumes: VolumeCache
) -> None:
    volumes.set_claim(persistent_volume_claim("data", storage_class="local-path"))
    nodes = [node_info(n, annotations={LOCAL_PATH_ROOT_ANNOTATION: "/r"}) for n in ("a", "b")]
    first = framework.schedule(with_claims("data"), nodes)
    assert framework.run_reserve(first.state, with_claims("data"), first.node) is None
    for _ in range(10):  # ties are broken at random: without the hold, some would go elsewhere
        assert place(framework, pod_info("q", volumes=with_claims("data").obj["spec"]["volumes"]),
                     nodes) == first.node  # fmt: skip
    framework.run_unreserve(first.state, with_claims("data"), first.node)
    claim = volumes.claim("default", "data")
    assert claim is not None and volumes.selected_node(claim) == ""


def test_a_pod_without_claims_skips_volume_binding(framework: Framework) -> None:
    result = framework.schedule(pod_info("plain"), NODES)
    assert "VolumeBinding" in result.state.skip_filter


def test_claim_volume_and_class_changes_wake_volume_binding_pods(volumes: VolumeCache) -> None:
    for event in (
        volumes.set_claim(persistent_volume_claim("c")),
        volumes.set_volume(persistent_volume("v")),
        volumes.set_class(storage_class("s", provisioner="x")),
    ):
        assert event.plugins == frozenset({"VolumeBinding"})
