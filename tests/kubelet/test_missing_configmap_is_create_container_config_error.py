"""A pod that references what does not exist waits, says why as Kubernetes does, and starts as
soon as the object appears.

* env naming a missing ConfigMap, Secret or key: the container waits with reason
  ``CreateContainerConfigError`` and Kubernetes' message, with an event Failed "Error: ...";
* a missing configMap volume: FailedMount warnings ("MountVolume.SetUp failed for volume ...")
  while the pod stays Pending with its container ``ContainerCreating``.

Real apiserver and kubelet processes; the missing objects are then made with ``kubectl create``.
"""

from __future__ import annotations

import pytest

from tests import factories
from tests.factories import sh
from tests.kubelet.conftest import Cluster
from tests.kubelet.pod_config import exec_out, kubectl, wait_event, waiting
from tests.kubelet.pods import create_and_wait, phase
from tests.kubelet.waits import pods_rt, wait_for_object

pytestmark = [pytest.mark.e2e]


def _env_pod(name: str, *refs: dict[str, object]) -> dict[str, object]:
    env = [{"name": f"V{i}", "valueFrom": ref} for i, ref in enumerate(refs)]
    return factories.pod(name, sh("sleep 3600") | {"env": env}, namespace="default")


async def test_missing_configmap_then_created_starts_the_container(cluster: Cluster) -> None:
    k = kubectl(cluster)
    pod = _env_pod("waiter", {"configMapKeyRef": {"name": "later", "key": "k"}})
    pod["spec"]["nodeName"] = cluster.node
    p = await create_and_wait(
        cluster, pod, lambda p: waiting(p).get("reason") == "CreateContainerConfigError"
    )
    assert waiting(p)["message"] == 'configmap "later" not found'
    assert phase(p) == "Pending"
    event = await wait_event(cluster, "waiter", lambda e: e.get("reason") == "Failed")
    assert event["type"] == "Warning" and event["message"] == 'Error: configmap "later" not found'

    k("create", "configmap", "later", "--from-literal=k=arrived")
    await wait_for_object(
        cluster.client, pods_rt(), "waiter", lambda p: phase(p) == "Running", namespace="default"
    )
    assert exec_out(k, "waiter", "printenv", "V0") == "arrived\n"


async def test_missing_key_and_missing_secret_name_what_is_missing(cluster: Cluster) -> None:
    k = kubectl(cluster)
    k("create", "configmap", "partial", "--from-literal=present=1")
    keyless = _env_pod("keyless", {"configMapKeyRef": {"name": "partial", "key": "absent"}})
    keyless["spec"]["nodeName"] = cluster.node
    p = await create_and_wait(
        cluster, keyless, lambda p: waiting(p).get("reason") == "CreateContainerConfigError"
    )
    assert waiting(p)["message"] == "couldn't find key absent in ConfigMap default/partial"

    secretless = _env_pod("secretless", {"secretKeyRef": {"name": "nope", "key": "x"}})
    secretless["spec"]["nodeName"] = cluster.node
    p = await create_and_wait(
        cluster, secretless, lambda p: waiting(p).get("reason") == "CreateContainerConfigError"
    )
    assert waiting(p)["message"] == 'secret "nope" not found'


async def test_optional_references_let_the_container_start(cluster: Cluster) -> None:
    k = kubectl(cluster)
    pod = _env_pod(
        "relaxed",
        {"configMapKeyRef": {"name": "never", "key": "k", "optional": True}},
        {"secretKeyRef": {"name": "never", "key": "k", "optional": True}},
    )
    pod["spec"]["nodeName"] = cluster.node
    pod["spec"]["containers"][0]["envFrom"] = [
        {"configMapRef": {"name": "never", "optional": True}}
    ]
    await create_and_wait(cluster, pod, lambda p: phase(p) == "Running")
    env = exec_out(k, "relaxed", "env")
    assert "V0=" not in env and "V1=" not in env


async def test_invalid_envfrom_keys_are_skipped_with_a_warning(cluster: Cluster) -> None:
    k = kubectl(cluster)
    k("create", "configmap", "odd", "--from-literal=good=1", "--from-literal=1bad=2")
    pod = factories.pod(
        "odd",
        sh("sleep 3600") | {"envFrom": [{"configMapRef": {"name": "odd"}}]},
        namespace="default",
        nodeName=cluster.node,
    )
    await create_and_wait(cluster, pod, lambda p: phase(p) == "Running")
    event = await wait_event(
        cluster, "odd", lambda e: e.get("reason") == "InvalidEnvironmentVariableNames"
    )
    assert event["message"] == (
        "Keys [1bad] from the EnvFrom configMap default/odd were skipped since they are "
        "considered invalid environment variable names."
    )
    assert exec_out(k, "odd", "printenv", "good") == "1\n"


async def test_missing_configmap_volume_is_failed_mount_then_runs(cluster: Cluster) -> None:
    k = kubectl(cluster)
    pod = factories.pod(
        "mounter",
        sh("sleep 3600") | {"volumeMounts": [{"name": "cfg", "mountPath": "/etc/cfg"}]},
        namespace="default",
        nodeName=cluster.node,
        volumes=[{"name": "cfg", "configMap": {"name": "vol-later"}}],
    )
    await cluster.client.create(pods_rt(), pod, namespace="default")
    event = await wait_event(cluster, "mounter", lambda e: e.get("reason") == "FailedMount")
    assert event["type"] == "Warning"
    assert event["message"] == (
        'MountVolume.SetUp failed for volume "cfg" : configmap "vol-later" not found'
    )
    p = await wait_for_object(
        cluster.client,
        pods_rt(),
        "mounter",
        lambda p: waiting(p).get("reason") == "ContainerCreating",
        namespace="default",
    )
    assert phase(p) == "Pending"

    k("create", "configmap", "vol-later", "--from-literal=file=content")
    await wait_for_object(
        cluster.client, pods_rt(), "mounter", lambda p: phase(p) == "Running", namespace="default"
    )
    assert exec_out(k, "mounter", "cat", "/etc/cfg/file") == "content"
