"""``docker compose --profile ha up`` for real: the compose file's highly available cluster.

The ``ha`` profile's services — ``ha-pki``, three etcd members, three apiservers, the front, two
leader-elected controller-managers and schedulers, one node — started by name (their
dependencies with them; the default cluster, which ``test_compose_stack.py`` runs, stays down)
with the Docker CLI's compose plugin against rootful Podman (``tests/e2e/podman_host.py``),
under a project name of its own (``kubelite-ha-e2e``; never at the same time as another stack:
both build ``kubelite:latest``). The test talks to the cluster as its admin does, with kubectl
through the front's published port and the admin kubeconfig ``ha-pki`` wrote.

What it proves: ``up --wait`` returns with every health check passing and ha-node1 Ready; the
objects sit in etcd under Kubernetes' key layout (``/registry/configmaps/<ns>/<name>``, read
from a member with etcd's own API); SIGKILL of the main process of one apiserver and of one etcd
member, and kubectl through the front goes on reading and writing; ``down -v`` leaves no
container, network or volume of the project.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kubelite.testing.waiting import poll_until
from tests.e2e.podman_host import PodmanHost, missing_capability

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.slow,
    pytest.mark.kubectl,
    pytest.mark.timeout(1800),  # a first run makes the base image with debootstrap
]

ROOT = Path(__file__).resolve().parents[2]
PROJECT = "kubelite-ha-e2e"
SERVICES = (
    "ha-front",
    "ha-controller-manager1",
    "ha-controller-manager2",
    "ha-scheduler1",
    "ha-scheduler2",
    "ha-node1",
)
"""Started by name: with them come ha-pki, the three members and the three apiservers."""

REASON = missing_capability()
if REASON:
    pytestmark.append(pytest.mark.skip(reason=f"compose stack not runnable here: {REASON}"))


class HaStack:
    """The ha profile as the test drives it: compose, podman and kubectl commands."""

    def __init__(self, host: PodmanHost, workdir: Path) -> None:
        self.host = host
        self.workdir = workdir
        self.env = {**host.env, "KUBELITE_HA_HTTPS_PORT": "", "COMPOSE_PROFILES": "ha"}
        self.kubeconfig = workdir / "kubeconfig"

    def compose(self, *args: str, timeout: float = 900) -> str:
        argv = ["docker", "compose", "-f", str(ROOT / "docker-compose.yml"), *args]
        result = subprocess.run(
            argv, cwd=ROOT, env=self.env, capture_output=True, text=True, timeout=timeout,
            check=False,
        )  # fmt: skip
        assert result.returncode == 0, (
            f"{' '.join(argv[1:])} exited {result.returncode}:\n{result.stdout[-3000:]}\n"
            f"{result.stderr[-4000:]}"
        )
        return result.stdout + result.stderr

    def container(self, service: str) -> str:
        return f"{PROJECT}-{service}-1"

    def admin_kubeconfig(self) -> None:
        """The admin kubeconfig of ha-pki, pointed at the front's published port (the server
        certificate names ha-front, so kubectl checks that name)."""
        self.host.podman("cp", f"{self.container('ha-apiserver1')}:/pki", str(self.workdir))
        front = self.compose("port", "ha-front", "6443").strip()
        text = (self.workdir / "pki" / "kubeconfig").read_text()
        text = text.replace("/pki/", f"{self.workdir / 'pki'}/")
        text = text.replace("https://ha-front:6443", f"https://{front}")
        self.kubeconfig.write_text(text)

    def kubectl(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            ["kubectl", "--kubeconfig", str(self.kubeconfig), "--tls-server-name", "ha-front",
             *args],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        if check:
            assert result.returncode == 0, f"kubectl {' '.join(args)}: {result.stderr}"
        return result

    def get(self, *args: str) -> Any:
        result = self.kubectl("get", *args, "-o", "json", check=False)
        return json.loads(result.stdout) if result.returncode == 0 else None

    def crash(self, service: str) -> None:
        """SIGKILL the container's main process, as the OOM killer would."""
        pid = self.host.podman("inspect", self.container(service), "--format", "{{.State.Pid}}")
        os.kill(int(pid.strip()), signal.SIGKILL)

    def etcd_keys(self, member: str, prefix: str) -> list[str]:
        """The keys under ``prefix`` as the etcd member holds them (etcd's v3 JSON API)."""
        end = prefix[:-1] + chr(ord(prefix[-1]) + 1)
        body = json.dumps(
            {
                "key": base64.b64encode(prefix.encode()).decode(),
                "range_end": base64.b64encode(end.encode()).decode(),
                "keys_only": True,
            }
        )
        out = self.host.podman(
            "exec", self.container(member), "curl", "-fsS", "-X", "POST",
            "http://127.0.0.1:2379/v3/kv/range", "-d", body,
        )  # fmt: skip
        return [base64.b64decode(kv["key"]).decode() for kv in json.loads(out).get("kvs", [])]


def node_ready(stack: HaStack) -> bool:
    node = stack.get("node", "ha-node1")
    conditions = (node or {}).get("status", {}).get("conditions", [])
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def writes_and_reads(stack: HaStack, name: str) -> bool:
    created = stack.kubectl("create", "configmap", name, check=False)
    if created.returncode != 0 and "AlreadyExists" not in created.stderr:
        return False  # an attempt whose answer was lost may have written it: then it exists
    return stack.get("configmap", name) is not None


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HaStack]:
    with PodmanHost(tmp_path_factory.mktemp("podman"), project=PROJECT) as host:
        s = HaStack(host, tmp_path_factory.mktemp("ha-admin"))
        s.compose("down", "-v", "--remove-orphans")  # a run killed half-way left these
        try:
            yield s
        finally:
            s.compose("down", "-v", "--remove-orphans", "--timeout", "20")
            host.podman("image", "prune", "-f")


def test_the_ha_profile_serves_through_the_front_and_survives_losing_members(
    stack: HaStack,
) -> None:
    started = time.monotonic()
    stack.compose("up", "-d", "--build", "--wait", "--wait-timeout", "600", *SERVICES)
    stack.admin_kubeconfig()
    poll_until(lambda: node_ready(stack), within=180, what="ha-node1 Ready")

    stack.kubectl("create", "configmap", "before")
    assert "/registry/configmaps/default/before" in stack.etcd_keys("ha-etcd2", "/registry/")
    assert not stack.etcd_keys("ha-etcd2", "/registry/core/")  # Kubernetes' layout only

    stack.crash("ha-apiserver1")
    stack.crash("ha-etcd1")
    # the front turns to the other apiservers; two members of three keep a quorum
    poll_until(lambda: writes_and_reads(stack, "after"), within=60, what="a write via the front")
    listed = stack.get("configmaps") or {"items": []}
    assert {"before", "after"} <= {cm["metadata"]["name"] for cm in listed["items"]}
    print(f"\nha profile: up to checks done in {time.monotonic() - started:.0f} s")


def test_down_leaves_nothing_of_the_project(stack: HaStack) -> None:
    stack.compose("down", "-v", "--remove-orphans", "--timeout", "20")
    assert not stack.host.containers(all_states=True)
    networks = stack.host.podman("network", "ls", "--format", "{{.Name}}").split()
    assert not [n for n in networks if n.startswith(PROJECT)]
    label = f"label=com.docker.compose.project={PROJECT}"
    assert not stack.host.podman("volume", "ls", "--filter", label, "--format", "{{.Name}}").split()
