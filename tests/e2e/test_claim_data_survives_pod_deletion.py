"""Data written through a claim outlives the pod that wrote it, with every component a separate
process (``kubelite up``'s command lines): a claim of the default ``local-path`` class, a pod
that writes a file through it — the scheduler selects a node, the local-path provisioner makes a
volume there, the PV controller binds it, the kubelet mounts it — then the pod is deleted and a
second pod on the same claim reads the file back (the volume's node affinity brings it to the same
node). Deleting the claim then removes the volume and its directory (reclaim policy Delete)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from api.registry import REGISTRY
from kubelite.testing.waiting import Watcher
from tests.e2e.cluster import PODS, Cluster, phase
from tests.factories import persistent_volume_claim, pod, sh

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(240)]

PVS = REGISTRY.require("", "PersistentVolume")
PVCS = REGISTRY.require("", "PersistentVolumeClaim")


def on_claim(name: str, script: str) -> dict[str, object]:
    return pod(
        name,
        sh(script) | {"volumeMounts": [{"name": "data", "mountPath": "/data"}]},
        restartPolicy="Never",
        terminationGracePeriodSeconds=1,
        volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": "notes"}}],
    )


async def finished(c: Cluster, name: str) -> str:
    """Await the pod's end; its phase."""
    await c.until(
        lambda: phase(c.pod(name)) in ("Succeeded", "Failed"), within=90, what=f"{name} ends"
    )
    return str(phase(c.pod(name)))


async def deleted(c: Cluster, name: str) -> None:
    await c.client.delete(PODS, name, namespace="default")
    await c.until(lambda: c.pod(name) is None, within=60, what=f"{name} deleted")


async def test_second_pod_reads_what_the_first_wrote(cluster: Cluster) -> None:
    c = cluster
    await c.client.create(PVCS, persistent_volume_claim("notes", storage="64Mi"))
    await c.client.create(PODS, on_claim("writer", "echo kept > /data/note"), namespace="default")
    assert await finished(c, "writer") == "Succeeded"
    writer_node = c.pod("writer")["spec"]["nodeName"]  # type: ignore[index]
    await deleted(c, "writer")

    await c.client.create(
        PODS, on_claim("reader", 'test "$(cat /data/note)" = kept'), namespace="default"
    )
    assert await finished(c, "reader") == "Succeeded"
    assert c.pod("reader")["spec"]["nodeName"] == writer_node  # type: ignore[index]

    claim = await c.client.get(PVCS, "notes", namespace="default")
    volume = await c.client.get(PVS, claim["spec"]["volumeName"])
    directory = Path(volume["spec"]["hostPath"]["path"])
    assert await asyncio.to_thread((directory / "note").read_text) == "kept\n"

    await deleted(c, "reader")
    async with Watcher(c.client, PVS) as volumes:
        await c.client.delete(PVCS, "notes", namespace="default")
        await volumes.wait_until(
            lambda _o: volumes.get(volume["metadata"]["name"]) is None,
            what="the released volume deleted",
            within=90,
        )
    assert not await asyncio.to_thread(directory.exists)
