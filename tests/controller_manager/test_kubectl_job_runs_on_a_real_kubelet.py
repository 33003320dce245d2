"""``kubectl create job`` runs to completion on a real kubelet (process runtime: ``sh -c 'exit
0'`` is a real process), ``kubectl wait --for=condition=complete`` returns, and ``kubectl get
job`` shows it Complete, 1/1, with a duration — against real apiserver, scheduler,
controller-manager and kubelet processes."""

from __future__ import annotations

import asyncio
import os
import random
from pathlib import Path

import pytest

from kubelite.testing.waiting import Watcher
from tests.controller_manager.conftest import Cluster
from tests.controller_manager.harness import NODES, ready_of
from tests.kubectl.harness import kubectl_binary

pytestmark = [pytest.mark.e2e, pytest.mark.kubectl, pytest.mark.timeout(180)]


async def kubectl(cluster: Cluster, *args: str) -> str:
    binary = kubectl_binary()
    assert binary is not None, "kubectl is not on the PATH"
    home = cluster.tmp_path / "kubectl-home"
    home.mkdir(exist_ok=True)
    proc = await asyncio.create_subprocess_exec(
        binary,
        f"--server={cluster.api.url}",
        f"--cache-dir={home / 'cache'}",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={"PATH": os.environ.get("PATH", ""), "HOME": str(home), "KUBECONFIG": os.devnull},
        cwd=Path(home),
    )
    out, err = await asyncio.wait_for(proc.communicate(), 90)
    if proc.returncode != 0:
        pytest.fail(f"kubectl {' '.join(args)} exited {proc.returncode}\n{out!r}\n{err!r}")
    return out.decode()


async def test_create_job_wait_complete_and_get(cluster: Cluster) -> None:
    cidr = f"127.{random.randint(150, 199)}.{random.randint(0, 255)}.0/24"
    await asyncio.to_thread(
        cluster.processes.scheduler, cluster.api.url, args=["--leader-elect=false"]
    )
    await asyncio.to_thread(
        cluster.processes.kubelet,
        cluster.api.url,
        "worker",
        runtime="process",
        args=["--pod-cidr", cidr, "--sandbox", "off"],
    )
    async with Watcher(cluster.client, NODES) as nodes:
        await nodes.wait_until(
            lambda _o: (ready_of(nodes.get("worker") or {}) or {}).get("status") == "True",
            what="node worker Ready",
        )
    created = await kubectl(
        cluster, "create", "job", "hello", "--image=busybox", "--", "sh", "-c", "exit 0"
    )
    assert created.strip() == "job.batch/hello created"
    waited = await kubectl(
        cluster, "wait", "--for=condition=complete", "job/hello", "--timeout=90s"
    )
    assert waited.strip() == "job.batch/hello condition met"
    table = (await kubectl(cluster, "get", "job", "hello")).splitlines()
    assert table[0].split() == ["NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE"]
    name, status, completions, duration, _age = table[1].split()
    assert (name, status, completions) == ("hello", "Complete", "1/1")
    assert duration.endswith("s")
    pods = await kubectl(cluster, "get", "pods", "-l", "job-name=hello", "-o", "name")
    assert len(pods.split()) == 1
