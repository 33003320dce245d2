"""emptyDir, hostPath and claim volumes on a real node: shared, checked, evicted, cleaned up.

* two containers of a pod share an emptyDir (one writes, the other reads);
* ``medium: Memory`` is a tmpfs on the node, unmounted and removed with the pod;
* an emptyDir over its ``sizeLimit`` evicts the pod (Failed, reason Evicted, Kubernetes' message);
* a hostPath volume's ``type`` is checked (FailedMount "hostPath type check failed: ...") and its
  data outlives the pod, while the pod's own volume dirs go;
* a claim-backed pod waits (FailedMount) until the claim is Bound, and a pod re-created on the
  same claim finds the data the first one wrote.

Real apiserver and kubelet processes; files are read with ``kubectl exec`` at container paths.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kubelite.testing.waiting import poll_until
from tests import factories
from tests.factories import Obj, sh
from tests.kubelet.conftest import Cluster
from tests.kubelet.pod_config import exec_out, kubectl, rt, wait_event, waiting
from tests.kubelet.pods import create_and_wait, phase
from tests.kubelet.waits import pods_rt, wait_for_object

pytestmark = [pytest.mark.e2e]


def _volumes_dir(c: Cluster, p: Obj) -> Path:
    return c.kubelet.state_dir / "pods" / p["metadata"]["uid"] / "volumes"


async def _delete_and_wait(c: Cluster, name: str) -> None:
    await c.client.delete(pods_rt(), name, namespace="default")
    await wait_for_object(c.client, pods_rt(), name, lambda p: p is None, namespace="default")


async def test_two_containers_share_an_emptydir(cluster: Cluster) -> None:
    k = kubectl(cluster)
    mount = {"volumeMounts": [{"name": "shared", "mountPath": "/shared"}]}
    await create_and_wait(
        cluster,
        factories.pod(
            "sharing",
            sh("echo from-writer > /shared/msg; sleep 3600", name="writer") | mount,
            sh("sleep 3600", name="reader") | mount,
            namespace="default",
            nodeName=cluster.node,
            volumes=[{"name": "shared", "emptyDir": {}}],
        ),
        lambda p: phase(p) == "Running",
    )
    poll_until(
        lambda: "from-writer" in k("exec", "sharing", "-c", "reader", "--", "cat", "/shared/msg",
                                   check=False).stdout,
        what="the writer's file in the reader's /shared",
    )  # fmt: skip


async def test_a_memory_emptydir_is_a_tmpfs_gone_with_the_pod(cluster: Cluster) -> None:
    k = kubectl(cluster)
    p = await create_and_wait(
        cluster,
        factories.pod(
            "ram",
            sh("sleep 3600") | {"volumeMounts": [{"name": "cache", "mountPath": "/cache"}]},
            namespace="default",
            nodeName=cluster.node,
            volumes=[{"name": "cache", "emptyDir": {"medium": "Memory", "sizeLimit": "8Mi"}}],
            terminationGracePeriodSeconds=1,  # sh as PID 1 ignores SIGTERM, as in Kubernetes
        ),
        lambda p: phase(p) == "Running",
    )
    on_node = _volumes_dir(cluster, p) / "kubernetes.io~empty-dir" / "cache"
    assert on_node.is_mount()
    assert exec_out(k, "ram", "stat", "-f", "-c", "%T", "/cache").strip() == "tmpfs"
    await _delete_and_wait(cluster, "ram")
    assert not on_node.is_mount() and not _volumes_dir(cluster, p).exists()


async def test_an_emptydir_over_its_size_limit_evicts_the_pod(cluster: Cluster) -> None:
    await create_and_wait(
        cluster,
        factories.pod(
            "hog",
            sh("head -c 2097152 /dev/zero > /scratch/big; sleep 3600")
            | {"volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}]},
            namespace="default",
            nodeName=cluster.node,
            volumes=[{"name": "scratch", "emptyDir": {"sizeLimit": "1Mi"}}],
        ),
        lambda p: phase(p) == "Running",
    )
    p = await wait_for_object(
        cluster.client, pods_rt(), "hog", lambda p: phase(p) == "Failed", namespace="default"
    )
    assert p is not None
    message = 'Usage of EmptyDir volume "scratch" exceeds the limit "1Mi". '
    assert p["status"]["reason"] == "Evicted" and p["status"]["message"] == message
    event = await wait_event(cluster, "hog", lambda e: e.get("reason") == "Evicted")
    assert event["type"] == "Warning" and event["message"] == message


async def test_host_path_type_is_checked_and_its_data_stays(cluster: Cluster) -> None:
    k = kubectl(cluster)
    not_a_dir = cluster.tmp / "plain-file"
    not_a_dir.write_text("x")
    await cluster.client.create(
        pods_rt(),
        factories.pod(
            "wrong-type",
            sh("sleep 3600") | {"volumeMounts": [{"name": "h", "mountPath": "/h"}]},
            namespace="default",
            nodeName=cluster.node,
            volumes=[{"name": "h", "hostPath": {"path": str(not_a_dir), "type": "Directory"}}],
        ),
        namespace="default",
    )
    event = await wait_event(cluster, "wrong-type", lambda e: e.get("reason") == "FailedMount")
    assert event["message"] == (
        f'MountVolume.SetUp failed for volume "h" : hostPath type check failed: '
        f"{not_a_dir} is not a directory"
    )

    host_dir = cluster.tmp / "host-data"  # DirectoryOrCreate makes it
    p = await create_and_wait(
        cluster,
        factories.pod(
            "host-writer",
            sh("echo kept > /data/file; sleep 3600")
            | {"volumeMounts": [{"name": "h", "mountPath": "/data"}]},
            namespace="default",
            nodeName=cluster.node,
            volumes=[
                {"name": "h", "hostPath": {"path": str(host_dir), "type": "DirectoryOrCreate"}},
                {"name": "scratch", "emptyDir": {}},
            ],
            terminationGracePeriodSeconds=1,
        ),
        lambda p: phase(p) == "Running",
    )
    poll_until(lambda: (host_dir / "file").exists(), what="the container's file on the host")
    assert exec_out(k, "host-writer", "cat", "/data/file") == "kept\n"
    await _delete_and_wait(cluster, "host-writer")
    assert (host_dir / "file").read_text() == "kept\n"
    assert not _volumes_dir(cluster, p).exists()


def _pv(name: str, path: Path) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name},
        "spec": {
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": "manual",
            "hostPath": {"path": str(path), "type": "DirectoryOrCreate"},
        },
    }


def _pvc(name: str) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": "manual",
            "resources": {"requests": {"storage": "1Gi"}},
        },
    }


async def _bind(c: Cluster, claim: str, volume: str) -> None:
    """Play the PV controller: point the claim at the volume and mark both Bound."""
    pvcs, pvs = rt("persistentvolumeclaims"), rt("persistentvolumes")
    pvc = await c.client.get(pvcs, claim, namespace="default")
    pvc["spec"]["volumeName"] = volume
    pvc = await c.client.update(pvcs, pvc, namespace="default")
    pvc["status"] = {
        "phase": "Bound",
        "accessModes": ["ReadWriteOnce"],
        "capacity": {"storage": "1Gi"},
    }
    await c.client.update_status(pvcs, pvc, namespace="default")
    pv = await c.client.get(pvs, volume)
    pv["spec"]["claimRef"] = {"namespace": "default", "name": claim, "uid": pvc["metadata"]["uid"]}
    pv = await c.client.update(pvs, pv)
    pv["status"] = {"phase": "Bound"}
    await c.client.update_status(pvs, pv)


async def test_claim_data_outlives_the_pod(cluster: Cluster) -> None:
    k = kubectl(cluster)
    data = cluster.tmp / "pv-data"
    await cluster.client.create(rt("persistentvolumes"), _pv(f"pv-{cluster.node}", data))
    await cluster.client.create(rt("persistentvolumeclaims"), _pvc("claim"), namespace="default")

    def user(name: str, script: str) -> Obj:
        return factories.pod(
            name,
            sh(script) | {"volumeMounts": [{"name": "d", "mountPath": "/data"}]},
            namespace="default",
            nodeName=cluster.node,
            volumes=[{"name": "d", "persistentVolumeClaim": {"claimName": "claim"}}],
            terminationGracePeriodSeconds=1,
        )

    await cluster.client.create(pods_rt(), user("first", "echo saved > /data/f; sleep 3600"))
    event = await wait_event(cluster, "first", lambda e: e.get("reason") == "FailedMount")
    assert event["message"].endswith("error processing PVC default/claim: PVC is not bound")
    p = await wait_for_object(
        cluster.client, pods_rt(), "first",
        lambda p: waiting(p).get("reason") == "ContainerCreating", namespace="default",
    )  # fmt: skip
    assert phase(p) == "Pending"

    await _bind(cluster, "claim", f"pv-{cluster.node}")
    await wait_for_object(
        cluster.client, pods_rt(), "first", lambda p: phase(p) == "Running", namespace="default"
    )
    poll_until(lambda: (data / "f").exists(), what="the first pod's file in the volume")
    await _delete_and_wait(cluster, "first")

    await create_and_wait(cluster, user("second", "sleep 3600"), lambda p: phase(p) == "Running")
    assert exec_out(k, "second", "cat", "/data/f") == "saved\n"
