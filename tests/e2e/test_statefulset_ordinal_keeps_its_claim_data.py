"""A StatefulSet's ordinal comes back to its own data, with every component a separate process
(``kubelite up``'s command lines, the process runtime): each pod of ``web`` gets the claim
``data-web-<ordinal>`` from the set's ``volumeClaimTemplates`` (default ``local-path`` class: the
scheduler picks a node, the provisioner makes the volume there, the PV controller binds it, the
kubelet mounts it). A file written through ``kubectl exec`` into ``web-0``'s mount is read back
from the new ``web-0`` the set makes after the old one is deleted. Then the controller-manager
is killed with SIGKILL while the set is scaled up and a pod deleted; the restarted one
converges the set to what it asks."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from api.registry import REGISTRY
from tests.e2e.cluster import PODS, Cluster, running
from tests.factories import container, pod_template, stateful_set
from tests.kubectl.harness import Kubectl

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.kubectl, pytest.mark.timeout(300)]

STATEFULSETS = REGISTRY.require("apps", "StatefulSet")
CLAIMS = REGISTRY.require("", "PersistentVolumeClaim")


def web(replicas: int) -> dict[str, object]:
    """Pods sleeping with the claim ``data`` mounted at /data (PID 1 ignores SIGTERM: 1 s grace)."""
    sleeper = container("app", "busybox", command=["sleep", "3600"])
    sleeper["volumeMounts"] = [{"name": "data", "mountPath": "/data"}]
    body = stateful_set("web", replicas=replicas, claim="data")
    body["spec"]["template"] = pod_template(
        {"app": "web"}, sleeper, terminationGracePeriodSeconds=1
    )
    body["spec"]["volumeClaimTemplates"][0]["spec"]["resources"]["requests"]["storage"] = "64Mi"
    return body


def ready_pod(c: Cluster, name: str, *, not_uid: str = "") -> bool:
    pod = c.pod(name)
    if pod is None or pod["metadata"].get("deletionTimestamp") or not running(pod):
        return False
    conditions = pod["status"].get("conditions") or []
    ready = any(x["type"] == "Ready" and x["status"] == "True" for x in conditions)
    return ready and pod["metadata"]["uid"] != not_uid


async def test_a_recreated_pod_finds_its_ordinals_data_and_a_killed_manager_converges(
    cluster: Cluster, tmp_path: Path
) -> None:
    c = cluster
    kubectl = Kubectl.on(c.server, workdir=tmp_path)

    async def run(*args: str) -> str:
        return (await asyncio.to_thread(kubectl, *args)).stdout

    await c.client.create(STATEFULSETS, web(2), namespace="default")
    await c.until(
        lambda: ready_pod(c, "web-0") and ready_pod(c, "web-1"), within=120, what="web-0, web-1"
    )
    for ordinal in (0, 1):
        await run("exec", f"web-{ordinal}", "--", "sh", "-c", f"echo kept-{ordinal} > /data/note")
    web0 = c.pod("web-0")
    assert web0 is not None
    volumes = {v["name"]: v for v in web0["spec"]["volumes"]}
    assert volumes["data"]["persistentVolumeClaim"]["claimName"] == "data-web-0"
    claim = await c.client.get(CLAIMS, "data-web-0", namespace="default")
    assert claim["metadata"]["labels"] == {"app": "web"}
    assert claim["status"]["phase"] == "Bound"

    await c.client.delete(PODS, "web-0", namespace="default")
    await c.until(
        lambda: ready_pod(c, "web-0", not_uid=web0["metadata"]["uid"]),
        within=120,
        what="a new web-0 Running and Ready",
    )
    assert (await run("exec", "web-0", "--", "cat", "/data/note")) == "kept-0\n"
    assert (await run("exec", "web-1", "--", "cat", "/data/note")) == "kept-1\n"
    same = await c.client.get(CLAIMS, "data-web-0", namespace="default")
    assert same["metadata"]["uid"] == claim["metadata"]["uid"]

    # The controller-manager dies hard; meanwhile the set grows and loses a pod.
    web1_uid = c.pod("web-1")["metadata"]["uid"]  # type: ignore[index]
    await c.kill("controller-manager")
    await c.client.patch(
        STATEFULSETS, "web", {"spec": {"replicas": 3}}, namespace="default", subresource="scale"
    )
    await c.client.delete(PODS, "web-1", namespace="default")
    await c.start("controller-manager")
    await c.until(
        lambda: (
            all(ready_pod(c, f"web-{i}") for i in range(3))
            and ready_pod(c, "web-1", not_uid=web1_uid)
        ),
        within=150,
        what="web-0..2 Running and Ready after the restart",
    )
    assert (await run("exec", "web-1", "--", "cat", "/data/note")) == "kept-1\n"
    sts = await c.client.get(STATEFULSETS, "web", namespace="default")
    assert sts["status"]["replicas"] == 3
    names = sorted(p["metadata"]["name"] for p in c.live_pods(label="app=web"))
    assert names == ["web-0", "web-1", "web-2"]
