"""``kubectl get pv,pvc,sc`` after the PV controller bound a claim: the stock kubectl shows
Kubernetes' columns filled in from both sides of the binding (STATUS Bound, the volume's CLAIM,
the claim's VOLUME, CAPACITY and ACCESS MODES)."""

from __future__ import annotations

import asyncio

import pytest

from kubelite.testing.waiting import Watcher
from tests.controller_manager.conftest import Cluster
from tests.controller_manager.harness import rt
from tests.factories import persistent_volume, persistent_volume_claim
from tests.kubectl.harness import Kubectl

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

PVS = rt("", "PersistentVolume")
PVCS = rt("", "PersistentVolumeClaim")


@pytest.fixture
def cm_args() -> tuple[str, ...]:
    return ("--leader-elect=false",)


def rows(text: str) -> list[list[str]]:
    return [line.split() for line in text.splitlines() if line.strip()]


async def test_get_pv_pvc_sc_show_the_binding(cluster: Cluster) -> None:
    kubectl = Kubectl.on(cluster.api.url, workdir=cluster.tmp_path)
    client = cluster.client
    await client.create(PVS, persistent_volume("shelf", storage="2Gi", storage_class="local-path"))
    await client.create(PVCS, persistent_volume_claim("books", storage="1Gi"))
    # a local-path claim waits for its first consumer: say the scheduler chose a node
    patch = {"metadata": {"annotations": {"volume.kubernetes.io/selected-node": "any"}}}
    await client.patch(PVCS, "books", patch, namespace="default")
    async with Watcher(client, PVCS, namespace="default") as claims:
        await claims.wait_until(
            lambda _o: (
                (claims.get("default/books") or {}).get("status", {}).get("phase") == "Bound"
            ),
            what="books Bound",
        )

    pv = rows((await asyncio.to_thread(kubectl, "get", "pv")).stdout)
    assert pv[0] == [
        "NAME", "CAPACITY", "ACCESS", "MODES", "RECLAIM", "POLICY", "STATUS", "CLAIM",
        "STORAGECLASS", "VOLUMEATTRIBUTESCLASS", "REASON", "AGE",
    ]  # fmt: skip
    assert pv[1][:7] == ["shelf", "2Gi", "RWO", "Retain", "Bound", "default/books", "local-path"]

    pvc = rows((await asyncio.to_thread(kubectl, "get", "pvc", "-n", "default")).stdout)
    assert pvc[0][:7] == ["NAME", "STATUS", "VOLUME", "CAPACITY", "ACCESS", "MODES", "STORAGECLASS"]
    assert pvc[1][:6] == ["books", "Bound", "shelf", "2Gi", "RWO", "local-path"]

    sc = rows((await asyncio.to_thread(kubectl, "get", "sc")).stdout)
    assert sc[1][:5] == [
        "local-path",
        "(default)",
        "kubelite.io/local-path",
        "Delete",
        "WaitForFirstConsumer",
    ]
