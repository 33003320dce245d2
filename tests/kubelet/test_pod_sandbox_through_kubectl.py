"""A pod on a real kubelet is its own world, as a user sees it with the stock kubectl.

Real apiserver and kubelet processes (``cluster`` fixture, sandbox on by default as root); every
look inside is a ``kubectl exec`` or ``kubectl cp`` through the apiserver's proxy, and the tty
exec goes through the official client's ``stream()``. What a sandboxed container sees in detail
is pinned at the runtime seam in ``test_pod_sandbox_isolates_the_host.py``.
"""

from __future__ import annotations

import asyncio
import random
import socket
import time
import uuid
from pathlib import Path

import pytest

from client.rest import ApiClient
from tests import factories
from tests.conftest import StartApiServer
from tests.kubectl.harness import Kubectl
from tests.kubelet.conftest import Cluster, StartKubelet
from tests.kubelet.pod_config import wait_event
from tests.kubelet.pods import create_and_wait, phase
from tests.kubelet.waits import pods_rt, wait_for_object

pytestmark = [pytest.mark.e2e]


def sleeper(name: str, **spec: object) -> dict[str, object]:
    """``sleep`` as PID 1: it ignores SIGTERM, so a short grace keeps deletion quick."""
    return factories.pod(
        name,
        factories.container("main", "busybox", command=["sleep", "3600"]),
        namespace="default",
        terminationGracePeriodSeconds=1,
        **spec,
    )


def exec_out(k: Kubectl, pod: str, script: str, *, check: bool = True) -> str:
    return k("exec", pod, "--", "sh", "-c", script, check=check).stdout


@pytest.fixture
async def kubectl(cluster: Cluster) -> Kubectl:
    return Kubectl.on(cluster.server, workdir=cluster.tmp)


async def test_a_pod_has_its_own_hostname_processes_and_read_only_root(
    cluster: Cluster, kubectl: Kubectl
) -> None:
    p = await create_and_wait(
        cluster, sleeper("island", nodeName=cluster.node), lambda p: phase(p) == "Running"
    )
    assert exec_out(kubectl, "island", "hostname").strip() == "island"
    ps = exec_out(kubectl, "island", "ps -e -o pid=,comm=").split("\n")
    procs = [line.split() for line in ps if line.strip()]
    assert procs[0] == ["1", "sleep"]  # the container is PID 1
    assert {comm for _, comm in procs} <= {"sleep", "sh", "ps"}  # nothing of the host
    refused = kubectl("exec", "island", "--", "touch", "/etc/x", check=False)
    assert refused.returncode != 0 and "Read-only file system" in refused.stderr
    hosts = exec_out(kubectl, "island", "cat /etc/hosts")
    assert f"{p['status']['podIP']}\tisland" in hosts.splitlines()
    assert exec_out(kubectl, "island", "wc -c < /etc/shadow").strip() == "0"


async def test_spec_hostname_names_the_pod(cluster: Cluster, kubectl: Kubectl) -> None:
    await create_and_wait(
        cluster,
        sleeper("named", nodeName=cluster.node, hostname="db-primary", subdomain="db"),
        lambda p: phase(p) == "Running",
    )
    assert exec_out(kubectl, "named", "hostname").strip() == "db-primary"
    assert "db-primary.db.default.svc.cluster.local" in exec_out(kubectl, "named", "cat /etc/hosts")


async def test_kubectl_cp_lands_in_the_pods_tmp_not_the_hosts(
    cluster: Cluster, kubectl: Kubectl, tmp_path: Path
) -> None:
    await create_and_wait(
        cluster, sleeper("box", nodeName=cluster.node), lambda p: phase(p) == "Running"
    )
    name = f"kubelite-cp-{uuid.uuid4().hex}"
    local = tmp_path / "upload.txt"
    local.write_text("carried in\n")
    kubectl("cp", str(local), f"box:/tmp/{name}")
    assert exec_out(kubectl, "box", f"cat /tmp/{name}") == "carried in\n"
    assert not (Path("/tmp") / name).exists()  # the host's /tmp never saw it
    exec_out(kubectl, "box", f"echo made inside > /tmp/{name}.out")
    back = tmp_path / "download.txt"
    kubectl("cp", f"box:/tmp/{name}.out", str(back))
    assert back.read_text() == "made inside\n"


def _tty_exec(server: str, pod: str, command: list[str], *, until: str) -> str:
    """The official client's ``stream()`` with a tty: what the terminal showed up to ``until``."""
    from kubernetes import client
    from kubernetes.stream import stream

    with client.ApiClient(client.Configuration(host=server)) as api_client:
        resp = stream(
            client.CoreV1Api(api_client).connect_get_namespaced_pod_exec,
            pod,
            "default",
            command=command,
            stdin=False,
            stdout=True,
            stderr=True,
            tty=True,
            _preload_content=False,
        )
        try:
            out = ""
            deadline = time.monotonic() + 30
            while until not in out and resp.is_open() and time.monotonic() < deadline:
                resp.update(timeout=max(deadline - time.monotonic(), 0))
                out += resp.read_stdout()
            return out
        finally:
            resp.close()


async def test_a_tty_exec_runs_inside_the_pod(cluster: Cluster) -> None:
    await create_and_wait(
        cluster, sleeper("term", nodeName=cluster.node), lambda p: phase(p) == "Running"
    )
    script = "hostname; test -t 0 && echo on-a-tty"
    command = ["sh", "-c", script]
    out = await asyncio.to_thread(_tty_exec, cluster.server, "term", command, until="on-a-tty")
    assert out.replace("\r\n", "\n").split() == ["term", "on-a-tty"]


async def test_a_restarted_kubelet_still_execs_inside_its_sandboxed_pod(
    cluster: Cluster, kubectl: Kubectl
) -> None:
    await create_and_wait(
        cluster, sleeper("keeper", nodeName=cluster.node), lambda p: phase(p) == "Running"
    )
    exec_out(kubectl, "keeper", "echo before > /tmp/mark")
    cluster.restart_kubelet()
    # the same container, in the same sandbox: its /tmp still holds what was written before
    assert exec_out(kubectl, "keeper", "hostname; cat /tmp/mark").split() == ["keeper", "before"]
    await cluster.client.delete(pods_rt(), "keeper", namespace="default")
    await wait_for_object(
        cluster.client, pods_rt(), "keeper", lambda p: p is None, namespace="default"
    )


async def test_sandbox_off_says_so_in_the_log_and_a_warning_and_pods_see_the_host(
    apiserver_process: StartApiServer, start_kubelet: StartKubelet, tmp_path: Path
) -> None:
    api = apiserver_process(store="memory://")
    node = "plain-node"
    cidr = f"127.{random.randint(150, 199)}.{random.randint(0, 255)}.0/24"
    kubelet = start_kubelet(
        api.url, node, runtime="process", args=["--pod-cidr", cidr, "--sandbox", "off"]
    )
    c = Cluster(
        server=api.url, client=ApiClient(server=api.url), kubelet=kubelet, node=node, tmp=tmp_path
    )
    try:
        log = kubelet.log_path.read_text()
        assert "pods run UNSANDBOXED" in log and "--sandbox=off" in log
        await create_and_wait(c, sleeper("bare", nodeName=node), lambda p: phase(p) == "Running")
        warning = await wait_event(c, "bare", lambda e: e.get("reason") == "Unsandboxed")
        assert warning["type"] == "Warning" and "--sandbox=off" in warning["message"]
        k = Kubectl.on(api.url, workdir=tmp_path)
        assert exec_out(k, "bare", "hostname").strip() == socket.gethostname()
    finally:
        await c.client.close()
