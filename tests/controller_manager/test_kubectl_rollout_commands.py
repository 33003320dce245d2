"""The stock kubectl drives Deployments on kubelite as on Kubernetes: ``apply``, ``rollout
status``, ``set image``, ``rollout history``, ``rollout undo`` — against real apiserver and
controller-manager processes (kubectl runs as a subprocess without blocking the test's loop, in
which the stand-in kubelets keep working)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from kubelite.testing.waiting import Watcher
from tests.controller_manager.conftest import Cluster
from tests.controller_manager.harness import PODS, RSS, active
from tests.kubectl.harness import kubectl_binary

pytestmark = [pytest.mark.e2e, pytest.mark.kubectl, pytest.mark.timeout(180)]

MANIFEST = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  annotations:
    kubernetes.io/change-cause: first
spec:
  replicas: 3
  selector:
    matchLabels: {app: web}
  strategy:
    rollingUpdate: {maxSurge: 1, maxUnavailable: 0}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: app
        image: nginx
"""


class AsyncKubectl:
    def __init__(self, binary: str, server: str, workdir: Path) -> None:
        self.binary, self.server, self.workdir = binary, server, workdir
        (workdir / "kube-cache").mkdir(exist_ok=True)

    async def __call__(self, *args: str, stdin: str | None = None) -> str:
        proc = await asyncio.create_subprocess_exec(
            self.binary,
            f"--server={self.server}",
            f"--cache-dir={self.workdir / 'kube-cache'}",
            *args,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env={
                "PATH": os.environ.get("PATH", ""),
                "HOME": str(self.workdir),
                "KUBECONFIG": "/dev/null",
            },
            cwd=self.workdir,
        )
        out, err = await asyncio.wait_for(proc.communicate(stdin.encode() if stdin else None), 90)
        if proc.returncode != 0:
            pytest.fail(
                f"kubectl {' '.join(args)} exited {proc.returncode}\n{out.decode()}\n{err.decode()}"
            )
        return out.decode()


def images(pods: list[dict]) -> set[str]:  # type: ignore[type-arg]
    return {p["spec"]["containers"][0]["image"] for p in pods if active(p)}


async def test_apply_set_image_rollout_status_history_undo(
    cluster: Cluster, tmp_path: Path
) -> None:
    binary = kubectl_binary()
    if binary is None:
        pytest.skip("no kubectl on the PATH")
    kubectl = AsyncKubectl(binary, cluster.api.url, tmp_path)
    client = cluster.client
    await cluster.start_nodes("node1", "node2")
    async with (
        Watcher(client, PODS, namespace="default", label_selector="app=web") as pods,
        Watcher(client, RSS, namespace="default") as rss,
    ):
        await kubectl("apply", "-f", "-", stdin=MANIFEST)
        out = await kubectl("rollout", "status", "deployment/web", "--timeout=90s")
        assert 'deployment "web" successfully rolled out' in out
        assert images(pods.objects()) == {"nginx"}

        await kubectl("set", "image", "deployment/web", "app=busybox")
        out = await kubectl("rollout", "status", "deployment/web", "--timeout=90s")
        assert 'deployment "web" successfully rolled out' in out
        await pods.wait_until(
            lambda o: images(o) == {"busybox"} and len(o) == 3, what="busybox pods"
        )

        history = await kubectl("rollout", "history", "deployment/web")
        lines = [line.split() for line in history.splitlines() if line[:1].isdigit()]
        assert [line[0] for line in lines] == ["1", "2"], history

        out = await kubectl("rollout", "undo", "deployment/web")
        assert "rolled back" in out
        out = await kubectl("rollout", "status", "deployment/web", "--timeout=90s")
        assert 'deployment "web" successfully rolled out' in out
        await pods.wait_until(
            lambda o: images(o) == {"nginx"} and len(o) == 3, what="nginx pods again"
        )

        revived = [
            rs
            for rs in rss.objects()
            if rs["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx"
        ]
        assert len(revived) == 1, "undo revives the first ReplicaSet instead of making a new one"
        annotations = revived[0]["metadata"]["annotations"]
        assert annotations["deployment.kubernetes.io/revision"] == "3"
        assert annotations["deployment.kubernetes.io/revision-history"] == "1"
        assert annotations["kubernetes.io/change-cause"] == "first"

        history = await kubectl("rollout", "history", "deployment/web")
        assert [line.split()[0] for line in history.splitlines() if line[:1].isdigit()] == [
            "2",
            "3",
        ]
