"""The stock kubectl drives a DaemonSet on kubelite as on Kubernetes — ``apply``, ``rollout
status``, ``set image``, ``rollout history`` (and ``--revision``), ``rollout undo`` (kubectl
patches the DaemonSet with an old ControllerRevision's data), ``rollout restart`` — and the
official client's AppsV1Api parses the DaemonSet and its ControllerRevisions; real apiserver,
controller-manager, scheduler and sim kubelet processes."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
from kubernetes import client as k8s

from kubelite.testing.waiting import Watcher
from tests.controller_manager.conftest import Cluster
from tests.controller_manager.harness import PODS, Obj
from tests.kubectl.harness import kubectl_binary

pytestmark = [pytest.mark.e2e, pytest.mark.kubectl, pytest.mark.timeout(180)]

MANIFEST = """\
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: agent
  annotations:
    kubernetes.io/change-cause: first
spec:
  selector:
    matchLabels: {app: agent}
  updateStrategy:
    type: RollingUpdate
    rollingUpdate: {maxUnavailable: 1}
  template:
    metadata:
      labels: {app: agent}
    spec:
      containers:
      - name: app
        image: nginx
"""


async def kubectl(binary: str, server: str, workdir: Path, *args: str, stdin: str = "") -> str:
    """Run kubectl as a subprocess, so the test's loop (and its watches) keep going."""
    (workdir / "kube-cache").mkdir(exist_ok=True)
    proc = await asyncio.create_subprocess_exec(
        binary,
        f"--server={server}",
        f"--cache-dir={workdir / 'kube-cache'}",
        *args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={"PATH": os.environ.get("PATH", ""), "HOME": str(workdir), "KUBECONFIG": "/dev/null"},
        cwd=workdir,
    )
    out, err = await asyncio.wait_for(proc.communicate(stdin.encode()), 90)
    if proc.returncode != 0:
        pytest.fail(f"kubectl {' '.join(args)} exited {proc.returncode}\n{out.decode()}\n{err.decode()}")  # fmt: skip
    return out.decode()


def live(pods: list[Obj]) -> list[Obj]:
    return [p for p in pods if not p["metadata"].get("deletionTimestamp")]


def images(pods: list[Obj]) -> list[str]:
    return sorted(p["spec"]["containers"][0]["image"] for p in live(pods))


def revisions_listed(history: str) -> list[str]:
    return [line.split()[0] for line in history.splitlines() if line[:1].isdigit()]


async def test_kubectl_rollout_status_history_undo_restart_on_a_daemon_set(
    cluster: Cluster, tmp_path: Path
) -> None:
    binary = kubectl_binary()
    if binary is None:
        pytest.skip("no kubectl on the PATH")

    async def run(*args: str, stdin: str = "") -> str:
        return await kubectl(binary, cluster.api.url, tmp_path, *args, stdin=stdin)

    await cluster.start_nodes("node1", "node2")
    async with Watcher(cluster.client, PODS, namespace="default", label_selector="app=agent") as pods:  # fmt: skip
        await run("apply", "-f", "-", stdin=MANIFEST)
        out = await run("rollout", "status", "ds/agent", "--timeout=90s")
        assert 'daemon set "agent" successfully rolled out' in out

        await run("set", "image", "ds/agent", "app=busybox")
        out = await run("rollout", "status", "ds/agent", "--timeout=90s")
        assert 'daemon set "agent" successfully rolled out' in out
        await pods.wait_until(lambda o: images(o) == ["busybox"] * 2, what="busybox pods")

        history = await run("rollout", "history", "ds/agent")
        assert revisions_listed(history) == ["1", "2"], history
        first = await run("rollout", "history", "ds/agent", "--revision=1")
        assert "nginx" in first and "busybox" not in first, first  # revision 1's template

        out = await run("rollout", "undo", "ds/agent")
        assert "rolled back" in out
        out = await run("rollout", "status", "ds/agent", "--timeout=90s")
        assert 'daemon set "agent" successfully rolled out' in out
        await pods.wait_until(lambda o: images(o) == ["nginx"] * 2, what="nginx pods again")
        history = await run("rollout", "history", "ds/agent")
        assert revisions_listed(history) == ["2", "3"], "undo renumbers revision 1 as 3"

        before = {p["metadata"]["name"] for p in live(pods.objects())}
        out = await run("rollout", "restart", "ds/agent")
        assert "restarted" in out
        out = await run("rollout", "status", "ds/agent", "--timeout=90s")
        assert 'daemon set "agent" successfully rolled out' in out
        await pods.wait_until(
            lambda o: len(live(o)) == 2 and not ({p["metadata"]["name"] for p in live(o)} & before),
            what="every pod replaced by the restart",
        )  # fmt: skip
        history = await run("rollout", "history", "ds/agent")
        assert revisions_listed(history) == ["2", "3", "4"], history

    apps = k8s.AppsV1Api(k8s.ApiClient(k8s.Configuration(host=cluster.api.url)))
    ds = await asyncio.to_thread(apps.read_namespaced_daemon_set_status, "agent", "default")
    assert isinstance(ds, k8s.V1DaemonSet)
    assert ds.status.desired_number_scheduled == ds.status.number_available == 2
    assert ds.status.updated_number_scheduled == 2
    assert ds.metadata.annotations["deprecated.daemonset.template.generation"] == "4"
    listed = await asyncio.to_thread(apps.list_namespaced_daemon_set, "default")
    assert [d.metadata.name for d in listed.items] == ["agent"]
    revisions = await asyncio.to_thread(
        apps.list_namespaced_controller_revision, "default", label_selector="app=agent"
    )
    assert sorted(r.revision for r in revisions.items) == [2, 3, 4]
    newest = max(revisions.items, key=lambda r: r.revision)
    assert isinstance(newest, k8s.V1ControllerRevision)
    assert newest.metadata.owner_references[0].kind == "DaemonSet"
    assert newest.data["spec"]["template"]["$patch"] == "replace"
    read = await asyncio.to_thread(
        apps.read_namespaced_controller_revision, newest.metadata.name, "default"
    )
    assert read.revision == 4
