"""The ``kubelite.io/local-path`` provisioner, in a real controller-manager process: a claim of the
default ``local-path`` class waits for its first consumer, gets a ``pvc-<uid>`` hostPath volume
under the selected node's published root with node affinity to that node, and binds; without a
node, or on a node that publishes no root, provisioning fails with an event. Deleting the claim
of a provisioned volume runs the helper pod on a real kubelet (process runtime), which removes
the directory; then the helper pod and the volume are gone. A helper pod that fails (an
immutable directory) is a ``VolumeFailedDelete`` event, and a later attempt deletes the volume."""

from __future__ import annotations

import asyncio
import random
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from client.rest import ApiClient
from kubelite.testing.waiting import Watcher
from tests.controller_manager.conftest import Cluster
from tests.controller_manager.harness import EVENTS, NODES, PODS, rt
from tests.factories import node, persistent_volume_claim, storage_class

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

PVS = rt("", "PersistentVolume")
PVCS = rt("", "PersistentVolumeClaim")
CLASSES = rt("storage.k8s.io", "StorageClass")

ROOT_ANNOTATION = "kubelite.io/local-path-root"
SELECTED_NODE = "volume.kubernetes.io/selected-node"

Obj = dict[str, Any]


@pytest.fixture
def cm_args() -> tuple[str, ...]:
    return ("--leader-elect=false",)


def phase(obj: Obj | None) -> str | None:
    return (obj or {}).get("status", {}).get("phase")


async def wait_for_event(client: ApiClient, name: str, reason: str) -> Obj:
    def matching(objs: list[Obj]) -> list[Obj]:
        return [
            e for e in objs if e["involvedObject"].get("name") == name and e.get("reason") == reason
        ]

    async with Watcher(client, EVENTS) as events:
        seen = await events.wait_until(lambda objs: bool(matching(objs)), what=f"{reason} {name}")
    return matching(seen)[0]


async def select_node(client: ApiClient, claim: str, node_name: str) -> None:
    """What the scheduler does when it places the claim's first pod."""
    patch = {"metadata": {"annotations": {SELECTED_NODE: node_name}}}
    await client.patch(PVCS, claim, patch, namespace="default")


async def bound_claim(client: ApiClient, name: str) -> Obj:
    async with Watcher(client, PVCS, namespace="default") as claims:
        await claims.wait_until(
            lambda _o: phase(claims.get(f"default/{name}")) == "Bound", what=f"{name} Bound"
        )
    return await client.get(PVCS, name, namespace="default")


async def test_claim_gets_a_hostpath_volume_on_its_selected_node(
    cluster: Cluster, tmp_path: Path
) -> None:
    client = cluster.client
    root = tmp_path / "storage"
    await client.create(NODES, node("n1", annotations={ROOT_ANNOTATION: str(root)}))
    # no class named: admission gives the claim the default local-path class
    claim = await client.create(PVCS, persistent_volume_claim("data", storage="2Gi"))
    assert claim["spec"]["storageClassName"] == "local-path"
    waiting = await wait_for_event(client, "data", "WaitForFirstConsumer")
    assert waiting["source"]["component"] == "persistentvolume-controller"

    await select_node(client, "data", "n1")
    claim = await bound_claim(client, "data")
    uid = claim["metadata"]["uid"]
    name = f"pvc-{uid}"
    assert claim["spec"]["volumeName"] == name
    assert claim["metadata"]["annotations"]["volume.kubernetes.io/storage-provisioner"] == (
        "kubelite.io/local-path"
    )

    volume = await client.get(PVS, name)
    spec = volume["spec"]
    assert volume["metadata"]["annotations"]["pv.kubernetes.io/provisioned-by"] == (
        "kubelite.io/local-path"
    )
    assert spec["hostPath"] == {
        "path": str(root / f"{name}_default_data"),
        "type": "DirectoryOrCreate",
    }
    assert spec["nodeAffinity"]["required"]["nodeSelectorTerms"] == [
        {
            "matchExpressions": [
                {"key": "kubernetes.io/hostname", "operator": "In", "values": ["n1"]}
            ]
        }
    ]
    assert spec["capacity"] == {"storage": "2Gi"}
    assert spec["accessModes"] == ["ReadWriteOnce"]
    assert spec["storageClassName"] == "local-path"
    assert spec["persistentVolumeReclaimPolicy"] == "Delete"
    assert (spec["claimRef"]["name"], spec["claimRef"]["uid"]) == ("data", uid)
    assert phase(volume) == "Bound"

    succeeded = await wait_for_event(client, "data", "ProvisioningSucceeded")
    assert succeeded["message"] == f"Successfully provisioned volume {name}"
    assert succeeded["source"]["component"] == "kubelite.io/local-path"
    external = await wait_for_event(client, "data", "ExternalProvisioning")
    assert "external provisioner 'kubelite.io/local-path'" in external["message"]


async def test_provisioning_fails_without_a_node_or_its_root(cluster: Cluster) -> None:
    client = cluster.client
    await client.create(NODES, node("bare"))
    await client.create(PVCS, persistent_volume_claim("on-bare", storage="1Gi"))
    await select_node(client, "on-bare", "bare")
    failed = await wait_for_event(client, "on-bare", "ProvisioningFailed")
    assert failed["type"] == "Warning"
    assert failed["message"] == (
        'failed to provision volume with StorageClass "local-path": node "bare" does not '
        f"publish its local storage root (annotation {ROOT_ANNOTATION})"
    )

    await client.create(CLASSES, storage_class("local-now", provisioner="kubelite.io/local-path"))
    await client.create(
        PVCS, persistent_volume_claim("no-node", storage="1Gi", storage_class="local-now")
    )
    failed = await wait_for_event(client, "no-node", "ProvisioningFailed")
    assert failed["message"] == (
        'failed to provision volume with StorageClass "local-now": '
        "configuration error, no node was specified"
    )
    for claim in ("on-bare", "no-node"):
        assert phase(await client.get(PVCS, claim, namespace="default")) == "Pending"


def _pod_cidr() -> str:
    return f"127.{random.randint(150, 199)}.{random.randint(0, 255)}.0/24"


async def start_process_kubelet(cluster: Cluster) -> Path:
    """A real kubelet (process runtime) for node ``disk-node``; the storage root it published."""
    kubelet = await asyncio.to_thread(
        cluster.processes.kubelet,
        cluster.api.url,
        "disk-node",
        runtime="process",
        args=["--pod-cidr", _pod_cidr()],
    )
    async with Watcher(cluster.client, NODES) as nodes:
        await nodes.wait_until(
            lambda _o: (
                ROOT_ANNOTATION
                in ((nodes.get("disk-node") or {}).get("metadata", {}).get("annotations") or {})
            ),
            what="the kubelet publishing its local storage root",
        )
        published = nodes.get("disk-node")
    assert published is not None and kubelet.state_dir is not None
    root = Path(published["metadata"]["annotations"][ROOT_ANNOTATION])
    assert root == (kubelet.state_dir / "storage").absolute()
    return root


async def provisioned_directory(client: ApiClient, claim: str) -> tuple[str, Path]:
    """Claim a volume on ``disk-node`` and write into it as a pod would; (volume, directory)."""
    await client.create(PVCS, persistent_volume_claim(claim, storage="1Gi"))
    await select_node(client, claim, "disk-node")
    volume_name = (await bound_claim(client, claim))["spec"]["volumeName"]
    directory = Path((await client.get(PVS, volume_name))["spec"]["hostPath"]["path"])
    (directory / "nested").mkdir(parents=True)
    (directory / "nested" / "file").write_text("data")
    return volume_name, directory


async def test_released_volume_is_removed_by_a_helper_pod_on_its_node(cluster: Cluster) -> None:
    client = cluster.client
    root = await start_process_kubelet(cluster)
    volume_name, directory = await provisioned_directory(client, "scratch")
    assert directory.parent == root

    helper = f"helper-pod-delete-{volume_name}"
    helper_phases: list[str] = []
    async with (
        Watcher(client, PVS) as volumes,
        Watcher(
            client,
            PODS,
            namespace="kube-system",
            on_event=lambda _t, pod: (
                helper_phases.append(phase(pod) or "")
                if pod["metadata"]["name"] == helper
                else None
            ),
        ) as pods,
    ):
        await client.delete(PVCS, "scratch", namespace="default")
        await volumes.wait_until(
            lambda _o: volumes.get(volume_name) is None, what=f"volume {volume_name} deleted"
        )
        await pods.wait_until(
            lambda _o: pods.get(f"kube-system/{helper}") is None, what="helper pod deleted"
        )
    assert "Succeeded" in helper_phases
    assert not await asyncio.to_thread(directory.exists)
    assert await asyncio.to_thread(root.is_dir)


def chattr(flag: str, path: Path) -> None:
    subprocess.run(["chattr", flag, str(path)], check=True, capture_output=True)


async def test_failed_helper_pod_is_reported_and_retried(cluster: Cluster) -> None:
    if shutil.which("chattr") is None:
        pytest.skip("chattr (e2fsprogs) is not installed")
    client = cluster.client
    await start_process_kubelet(cluster)
    volume_name, directory = await provisioned_directory(client, "stuck")
    try:
        # an immutable directory: even root's rm -rf fails, so the helper pod fails
        await asyncio.to_thread(chattr, "+i", directory)
    except subprocess.CalledProcessError as exc:
        pytest.skip(f"this filesystem has no immutable flag: {exc.stderr!r}")
    try:
        await client.delete(PVCS, "stuck", namespace="default")
        failed = await wait_for_event(client, volume_name, "VolumeFailedDelete")
        assert failed["type"] == "Warning"
        assert failed["message"] == (
            f"failed to delete volume {volume_name}: "
            f"helper pod helper-pod-delete-{volume_name} failed"
        )
        assert phase(await client.get(PVS, volume_name)) == "Released"
    finally:
        await asyncio.to_thread(chattr, "-i", directory)
    async with Watcher(client, PVS) as volumes:
        await volumes.wait_until(
            lambda _o: volumes.get(volume_name) is None, what="volume deleted on a later attempt"
        )
    assert not await asyncio.to_thread(directory.exists)
