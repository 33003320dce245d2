"""The controller-manager caches objects without ``metadata.managedFields`` (as Kubernetes'
does), yet what it writes back from those caches leaves every other manager's field ownership
as kubectl shows it: a Deployment scaled with ``kubectl scale`` makes the deployment controller
update its ReplicaSet from the cached copy, and the ReplicaSet keeps the entry ``kubectl label``
made, to the letter; the Deployment, annotated by the controller from its cache, keeps
``kubectl apply``'s ownership of the template. Real apiserver and
controller-manager processes, the stock kubectl."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from kubelite.testing.waiting import Watcher
from tests.controller_manager.conftest import Cluster
from tests.controller_manager.harness import RSS
from tests.kubectl.harness import Kubectl

pytestmark = [pytest.mark.e2e, pytest.mark.kubectl, pytest.mark.timeout(180)]

Obj = dict[str, Any]

MANIFEST = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 1
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: app
        image: nginx
"""


def owning(obj: Obj, *path: str) -> list[Obj]:
    """The managedFields entries that own the field at ``path`` (``f:`` names)."""
    found = []
    for entry in obj["metadata"].get("managedFields") or []:
        node = entry.get("fieldsV1") or {}
        for name in path:
            node = node.get(f"f:{name}") if isinstance(node, dict) else None
        if node is not None:
            found.append(entry)
    return found


async def shown(kubectl: Kubectl, kind: str, name: str) -> Obj:
    done = await asyncio.to_thread(
        kubectl, "get", kind, name, "-o", "json", "--show-managed-fields"
    )
    obj: Obj = json.loads(done.stdout)
    return obj


async def test_scaling_from_the_trimmed_cache_keeps_kubectls_entries(
    cluster: Cluster, tmp_path: Path
) -> None:
    kubectl = Kubectl.on(cluster.api.url, workdir=tmp_path)
    await asyncio.to_thread(kubectl.apply, MANIFEST)
    [applied] = owning(await shown(kubectl, "deployment", "web"), "spec", "template")
    async with Watcher(cluster.client, RSS, namespace="default") as sets:
        [rs] = await sets.wait_until(lambda objs: len(objs) == 1, what="web's ReplicaSet")
        name = rs["metadata"]["name"]
        await asyncio.to_thread(kubectl, "label", "rs", name, "team=a")
        [labelled] = owning(await shown(kubectl, "rs", name), "metadata", "labels", "team")
        await asyncio.to_thread(kubectl, "scale", "deployment", "web", "--replicas=3")
        await sets.wait_until(
            lambda objs: [o["spec"]["replicas"] for o in objs] == [3],
            what="the ReplicaSet scaled to 3 by the deployment controller",
        )
    after = await shown(kubectl, "rs", name)
    assert after["metadata"]["labels"]["team"] == "a"
    assert owning(after, "metadata", "labels", "team") == [labelled]  # to its timestamp
    [scaler] = owning(after, "spec", "replicas")
    assert scaler["manager"] != labelled["manager"] and scaler.get("subresource", "") == ""
    deployment = await shown(kubectl, "deployment", "web")
    assert deployment["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "1"
    [still] = owning(deployment, "spec", "template")  # the scale took spec.replicas, not this
    assert still["manager"] == applied["manager"]
    assert still["fieldsV1"]["f:spec"]["f:template"] == applied["fieldsV1"]["f:spec"]["f:template"]
