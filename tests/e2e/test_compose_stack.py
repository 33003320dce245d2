"""``docker compose up`` for real: the repository's docker-compose.yml and Dockerfile, unmodified.

Exercised with the Docker CLI and its compose v2 plugin (``docker compose``, what users run)
against rootful Podman's Docker-compatible API, set up by ``tests/e2e/podman_host.py`` (its
docstring says how, and why each setting). The stack lives under a project name of its own
(``kubelite-e2e``), its published ports moved to free loopback ports by ``KUBELITE_API_PORT``
and ``KUBELITE_HTTPS_PORT``; the test talks only to 127.0.0.1 — kubectl and ``/readyz`` —
and pods are reached through ``kubectl exec`` in their node's container.

What it proves, in order:

1. ``docker compose build`` builds the image from the Dockerfile, and
   ``docker compose up -d --build --wait`` returns once every health check passes;
   ``/readyz`` answers, both nodes are Ready in kubectl, an nginx pod runs, and ``kubectl logs``
   and ``kubectl exec`` work through the apiserver container to the kubelet's container; the
   pod exposed as a Service, its ClusterIP answers ``curl`` inside the pod's node container
   (``kubelite node`` runs the node's proxy beside its kubelet).
2. A component that crashes is brought back by the restart policy and the cluster resyncs:
   SIGKILL to the apiserver's process (its container restarts; the pod and its uid are still
   there, and a new pod runs), then to the kubelet of the pod's node (the pod's process died
   with that container: the kubelet restarts it in place, same uid and pod IP, from the state
   in its named volume) — and the ClusterIP answers again through the re-created node's proxy.
   ``docker compose kill`` is a *manual* stop to Docker and to Podman
   alike — restart policies deliberately leave such a container stopped — so a crash is
   made the way the kernel makes one, by killing the container's main process; after
   ``docker compose kill scheduler``, ``up -d --wait`` brings it back and pods schedule again.
3. ``docker compose down`` then ``up`` again: the same objects (state in the named volumes).
4. ``docker compose down -v`` leaves nothing: no container, network or volume of the project,
   no kubelite process and no conmon of ours on the host.

Where the machine cannot run it, the test is skipped with the missing capability as the reason.
Waits poll kubectl or podman (external tools announce nothing) under generous deadlines.
"""

from __future__ import annotations

import ipaddress
import json
import os
import signal
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kubelite.testing.waiting import poll_until
from tests.e2e.podman_host import CACHE, RUN, PodmanHost, missing_capability

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.slow,
    pytest.mark.kubectl,
    pytest.mark.timeout(1800),  # a first run makes the base image with debootstrap
]

ROOT = Path(__file__).resolve().parents[2]
PROJECT = "kubelite-e2e"
NODES = ("node1", "node2")
KUBELITE_IN_IMAGE = "/opt/venv/bin/kubelite"
"""How the image's components appear in the host's process table (the base image's venv)."""

REASON = missing_capability()
if REASON:
    pytestmark.append(pytest.mark.skip(reason=f"compose stack not runnable here: {REASON}"))


class Stack:
    """The compose project as the test drives it: compose, kubectl and podman commands."""

    def __init__(self, host: PodmanHost) -> None:
        self.host = host
        # empty: the engine publishes on any free host port, read back after each `up`
        self.env = {**host.env, "KUBELITE_API_PORT": "", "KUBELITE_HTTPS_PORT": ""}
        self.server = ""
        self.timings: dict[str, float] = {}

    def compose(self, *args: str, timeout: float = 600) -> str:
        argv = ["docker", "compose", "-f", str(ROOT / "docker-compose.yml"), *args]
        result = subprocess.run(
            argv, cwd=ROOT, env=self.env, capture_output=True, text=True, timeout=timeout,
            check=False,
        )  # fmt: skip
        assert result.returncode == 0, (
            f"{' '.join(argv[1:])} exited {result.returncode}:\n{result.stdout[-3000:]}\n"
            f"{result.stderr[-4000:]}\n{self.diagnose()}"
        )
        return result.stdout + result.stderr

    def timed(self, what: str, *args: str, timeout: float = 600) -> str:
        start = time.monotonic()
        out = self.compose(*args, timeout=timeout)
        self.timings[what] = time.monotonic() - start
        if args[0] == "up":
            self.server = f"http://{self.compose('port', 'apiserver', '8080').strip()}"
        return out

    def kubectl(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            ["kubectl", "-s", self.server, *args],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        if check:
            assert result.returncode == 0, f"kubectl {' '.join(args)}: {result.stderr}"
        return result

    def get(self, *args: str) -> Any:
        result = self.kubectl("get", *args, "-o", "json", check=False)
        return json.loads(result.stdout) if result.returncode == 0 else None

    def container(self, service: str) -> str:
        return f"{PROJECT}-{service}-1"

    def inspect(self, service: str, fmt: str) -> str:
        return self.host.podman("inspect", self.container(service), "--format", fmt).strip()

    def crash(self, service: str) -> int:
        """SIGKILL the container's main process, as the OOM killer would; its restart count."""
        count = int(self.inspect(service, "{{.RestartCount}}"))
        os.kill(int(self.inspect(service, "{{.State.Pid}}")), signal.SIGKILL)
        return count

    def diagnose(self) -> str:
        try:
            ps = self.host.podman("ps", "-a", "--format", "{{.Names}} {{.Status}}")
            logs = []
            for name in self.host.containers(all_states=True):
                tail = subprocess.run(
                    ["podman", "logs", "--tail", "15", name],
                    env=self.env,
                    capture_output=True,
                    text=True,
                    timeout=30,
                    check=False,
                )
                logs.append(f"--- {name}\n{tail.stdout}{tail.stderr}")
        except Exception as exc:  # diagnostics must not hide the failure they explain
            return f"(no diagnostics: {exc})"
        return f"containers:\n{ps}\n" + "\n".join(logs)


def readyz(stack: Stack) -> bool:
    try:
        with urllib.request.urlopen(f"{stack.server}/readyz", timeout=5) as r:
            return r.status == 200 and r.read().strip() == b"ok"
    except OSError:
        return False


def nodes_ready(stack: Stack) -> bool:
    nodes = stack.get("nodes") or {"items": []}
    ready = {
        n["metadata"]["name"]
        for n in nodes["items"]
        for c in n.get("status", {}).get("conditions", [])
        if c["type"] == "Ready" and c["status"] == "True"
    }
    return ready == set(NODES)


def running_pod(stack: Stack, name: str, *, restarted: int = 0) -> dict | None:
    pod = stack.get("pod", name)
    if not pod or pod.get("status", {}).get("phase") != "Running":
        return None
    statuses = pod["status"].get("containerStatuses") or [{}]
    state = statuses[0]
    if "running" not in state.get("state", {}) or state.get("restartCount", 0) < restarted:
        return None
    return pod


def identity(pod: dict) -> tuple[str, str, str]:
    return (pod["metadata"]["uid"], pod["spec"]["nodeName"], pod["status"]["podIP"])


def serves_nginx(stack: Stack, pod: str) -> bool:
    result = stack.kubectl(
        "exec", pod, "--", "sh", "-c", "curl -fsS http://$POD_IP:80/", check=False
    )
    return result.returncode == 0 and "Welcome to nginx" in result.stdout


def serves_through_cluster_ip(stack: Stack, node: str, cluster_ip: str) -> bool:
    """``curl`` a ClusterIP inside ``node``'s container: the node's own proxy forwards it (to an
    endpoint on that node — the other node's pod IPs are not on this container's loopback)."""
    result = subprocess.run(
        ["podman", "exec", stack.container(node), "curl", "-fsS", "--max-time", "5",
         f"http://{cluster_ip}/"],
        env=stack.env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    return result.returncode == 0 and "Welcome to nginx" in result.stdout


def leftovers(stack: Stack) -> list[str]:
    """What of the project is still on the host: containers, networks, volumes, processes."""
    label = f"label=com.docker.compose.project={PROJECT}"
    found = [f"container {c}" for c in stack.host.containers(all_states=True)]
    found += [
        f"network {n}"
        for n in stack.host.podman("network", "ls", "--format", "{{.Name}}").split()
        if n.startswith(PROJECT)
    ]
    found += [
        f"volume {v}"
        for v in stack.host.podman(
            "volume", "ls", "--filter", label, "--format", "{{.Name}}"
        ).split()
    ]
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if KUBELITE_IN_IMAGE in cmdline or (str(RUN) in cmdline and "conmon" in cmdline):
            found.append(f"process {pid}: {cmdline[:120]}")
    return found


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    start = time.monotonic()
    with PodmanHost(tmp_path_factory.mktemp("podman"), project=PROJECT) as host:
        s = Stack(host)
        s.timings["engine and base image"] = time.monotonic() - start
        s.compose("down", "-v", "--remove-orphans")  # a run killed half-way left these
        try:
            yield s
        finally:
            s.compose("down", "-v", "--remove-orphans", "--timeout", "20")
            # rebuilt images leave their predecessors untagged: keep only the tagged cache
            host.podman("image", "prune", "-f")
    print(f"\ncompose stack timings (s): { {k: round(v, 1) for k, v in s.timings.items()} }")
    print(f"health-check runs driven: {host.health_runs}; cache {CACHE}")


def test_compose_up_runs_the_cluster_survives_crashes_and_down_leaves_nothing(
    stack: Stack,
) -> None:
    begin = time.monotonic()
    # ---- 1. build, up --wait, the cluster works --------------------------------------------
    stack.timed("image build", "build")
    stack.timed("up --build --wait", "up", "-d", "--build", "--wait", "--wait-timeout", "300")
    assert readyz(stack)
    ready_from = time.monotonic()
    poll_until(
        lambda: nodes_ready(stack),
        within=120,
        what="node1 and node2 Ready",
        describe=stack.diagnose,
    )
    stack.timings["Ready after --wait returned"] = time.monotonic() - ready_from
    stack.timings["up to both nodes Ready"] = (
        stack.timings["up --build --wait"] + stack.timings["Ready after --wait returned"]
    )
    for node in NODES:  # what the kubelet advertises must pass the apiserver's validation
        addresses = {
            a["type"]: a["address"] for a in stack.get("node", node)["status"]["addresses"]
        }
        assert addresses["Hostname"] == node, addresses
        ipaddress.ip_address(addresses["InternalIP"])  # --node-ip=node1 resolved to an IP

    stack.kubectl("run", "web", "--image=nginx")
    web = poll_until(
        lambda: running_pod(stack, "web"), within=120, what="web Running", describe=stack.diagnose
    )
    before = identity(web)
    logs = poll_until(
        lambda: stack.kubectl("logs", "web", check=False).stdout,
        within=60,
        what="logs",
        describe=stack.diagnose,
    )
    assert "nginx" in logs
    assert poll_until(
        lambda: serves_nginx(stack, "web"), within=60, what="exec", describe=stack.diagnose
    )
    stack.kubectl("expose", "pod", "web", "--port=80")
    cluster_ip = stack.get("service", "web")["spec"]["clusterIP"]
    assert ipaddress.ip_address(cluster_ip).is_loopback, cluster_ip
    assert poll_until(
        lambda: serves_through_cluster_ip(stack, before[1], cluster_ip),
        within=60, what=f"the ClusterIP {cluster_ip} answering in {before[1]}",
        describe=stack.diagnose,
    )  # fmt: skip

    # ---- 2. crashes: the restart policy brings each back, the cluster resyncs --------------
    restarts = stack.crash("apiserver")
    poll_until(
        lambda: int(stack.inspect("apiserver", "{{.RestartCount}}")) > restarts and readyz(stack),
        within=120, what="the apiserver restarted and ready", describe=stack.diagnose,
    )  # fmt: skip
    again = poll_until(
        lambda: running_pod(stack, "web"), within=60, what="web", describe=stack.diagnose
    )
    assert identity(again) == before
    stack.kubectl("run", "web2", "--image=nginx")
    web2 = poll_until(
        lambda: running_pod(stack, "web2"), within=120, what="a pod created after the restart",
        describe=stack.diagnose,
    )  # fmt: skip

    node = before[1]
    restarts = stack.crash(node)
    poll_until(
        lambda: int(stack.inspect(node, "{{.RestartCount}}")) > restarts,
        within=120, what=f"{node}'s container restarted", describe=stack.diagnose,
    )  # fmt: skip
    again = poll_until(
        lambda: running_pod(stack, "web", restarted=1), within=120,
        what="web restarted in place by its kubelet", describe=stack.diagnose,
    )  # fmt: skip
    assert identity(again) == before
    assert poll_until(
        lambda: serves_nginx(stack, "web"), within=60, what="exec", describe=stack.diagnose
    )
    assert poll_until(
        lambda: serves_through_cluster_ip(stack, node, cluster_ip),
        within=60, what="the ClusterIP answering through the re-created node's proxy",
        describe=stack.diagnose,
    )  # fmt: skip
    poll_until(
        lambda: nodes_ready(stack), within=120, what="both nodes Ready", describe=stack.diagnose
    )

    # `docker compose kill` is a manual stop: `up -d --wait` is what brings the service back
    stack.compose("kill", "scheduler")
    stack.timed("up --wait after kill", "up", "-d", "--wait", "--wait-timeout", "300")
    stack.kubectl("run", "web3", "--image=nginx")
    poll_until(
        lambda: running_pod(stack, "web3"), within=120, what="a pod scheduled after the kill",
        describe=stack.diagnose,
    )  # fmt: skip

    # ---- 3. down, up: the named volumes keep the cluster ------------------------------------
    stack.timed("down", "down", "--timeout", "20")
    assert stack.host.containers(all_states=True) == []
    stack.timed("up again --wait", "up", "-d", "--wait", "--wait-timeout", "300")
    poll_until(
        lambda: nodes_ready(stack), within=120, what="nodes Ready again", describe=stack.diagnose
    )
    again = poll_until(
        lambda: running_pod(stack, "web", restarted=2), within=120,
        what="web running again after down/up", describe=stack.diagnose,
    )  # fmt: skip
    assert identity(again)[:2] == before[:2]  # same object, same node
    assert stack.get("pod", "web2")["metadata"]["uid"] == web2["metadata"]["uid"]

    # ---- 4. down -v leaves nothing behind ---------------------------------------------------
    stack.timed("down -v", "down", "-v", "--timeout", "20")
    poll_until(
        lambda: not leftovers(stack), within=60, what="nothing left", describe=stack.diagnose
    )
    stack.timings["whole scenario"] = time.monotonic() - begin
