"""``kubectl port-forward`` through a real apiserver and kubelet, with each kubectl kind of wire.

kubectl 1.30 (and older) upgrades to plain SPDY/3.1; 1.31 and newer tunnel the same SPDY inside a
WebSocket (``SPDY/3.1+portforward.k8s.io``); the ``kubectl`` on the PATH is the dispatcher, which
picks by the version the apiserver reports. Each is driven here against one apiserver and one
kubelet (process runtime) running an nginx pod and a python echo server.
"""

from __future__ import annotations

import os
import random
import re
import shutil
import socket
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from api.registry import REGISTRY
from kubelite.testing import Processes
from kubelite.testing.waiting import poll_until
from tests import factories
from tests.kubectl.harness import Kubectl, StreamingKubectl

pytestmark = [pytest.mark.e2e]

ECHO_PORT = factories.ECHO_PORT
CLOSED_PORT = 9001
PAYLOAD_BYTES = 4 * 1024 * 1024
CONNECTIONS = 4


@dataclass(frozen=True)
class Node:
    server: str
    workdir: Path


def listening(port: int) -> dict[str, object]:
    return {"tcpSocket": {"port": port}, "periodSeconds": 1}


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Node]:
    """An apiserver and a kubelet running ``web`` (nginx, labelled app=web) and ``echo``."""
    root = tmp_path_factory.mktemp("port-forward")
    processes = Processes(root)
    try:
        api = processes.apiserver(store="memory://")
        name = f"pf-{random.randint(1000, 9999)}"
        cidr = f"127.{random.randint(150, 199)}.{random.randint(0, 255)}.0/24"
        processes.kubelet(
            api.url, name, runtime="process", args=["--pod-cidr", cidr, "--stop-pods-on-exit"]
        )
        kubectl = Kubectl.on(api.url, workdir=root)
        poll_until(lambda: kubectl("get", "node", name, check=False).returncode == 0, what="node")
        # ready only once each server listens: a forward before that would be refused
        web = factories.pod(
            "web",
            factories.container("web", "nginx", readinessProbe=listening(80)),
            labels={"app": "web"},
        )
        web["spec"]["nodeName"] = name
        echo = factories.pod(
            "echo",
            factories.echo_server(readinessProbe=listening(ECHO_PORT)),
        )
        echo["spec"]["nodeName"] = name
        for pod in (web, echo):
            kubectl.apply(pod, "--validate=false")
        for pod_name in ("web", "echo"):
            poll_until(
                lambda n=pod_name: (
                    kubectl(
                        "get", "pod", n, "-o", "jsonpath={.status.containerStatuses[0].ready}"
                    ).stdout
                    == "true"
                ),
                what=f"pod {pod_name} ready",
            )
        yield Node(server=api.url, workdir=root)
    finally:
        processes.stop_all()


def kubectl_of(node: Node, tmp_path: Path, version: str) -> Kubectl:
    """``PATH``: the dispatcher on the PATH (it asks the apiserver's version); else 1.<version>."""
    if version == "PATH":
        found = shutil.which("kubectl")
        if found is None:
            pytest.skip("no kubectl on the PATH")
        cache = tmp_path / "kube-cache"
        cache.mkdir()
        return Kubectl(binary=found, server=node.server, cache_dir=cache, workdir=tmp_path)
    return Kubectl.on(node.server, workdir=tmp_path, minor=int(version))


@pytest.fixture
def forward(node: Node, tmp_path: Path) -> Iterator[_Forwards]:
    forwards = _Forwards(node, tmp_path)
    yield forwards
    forwards.stop()


@dataclass(frozen=True)
class Forward:
    session: StreamingKubectl
    local: int
    remote: int
    """The pod's port, as kubectl reports it (a Service's port translated to its targetPort)."""


class _Forwards:
    """Starts ``kubectl port-forward`` sessions; stops them all at teardown."""

    def __init__(self, node: Node, tmp_path: Path) -> None:
        self.node, self.tmp_path = node, tmp_path
        self.running: list[StreamingKubectl] = []

    def start(self, target: str, port: int, *, version: str = "PATH") -> Forward:
        """``kubectl port-forward <target> :<port>`` (kubectl picks the local port)."""
        workdir = self.tmp_path / f"kubectl-{len(self.running)}"
        workdir.mkdir()
        kubectl = kubectl_of(self.node, workdir, version)
        session = kubectl.start("port-forward", target, f":{port}", "--address", "127.0.0.1")
        self.running.append(session)
        line = session.next_line()
        found = re.fullmatch(r"Forwarding from 127\.0\.0\.1:(\d+) -> (\d+)", line)
        assert found, line
        return Forward(session, local=int(found.group(1)), remote=int(found.group(2)))

    def stop(self) -> None:
        for session in self.running:
            session.stop()


def echo_through(port: int, payload: bytes) -> bytes:
    """Send ``payload`` to 127.0.0.1:``port`` while reading, half-close, read to the end."""
    with (
        socket.create_connection(("127.0.0.1", port), timeout=60) as conn,
        ThreadPoolExecutor(1) as pool,
    ):

        def send() -> None:
            conn.sendall(payload)
            conn.shutdown(socket.SHUT_WR)

        sending = pool.submit(send)
        received = bytearray()
        while chunk := conn.recv(1 << 20):
            received += chunk
        sending.result()
    return bytes(received)


VERSIONS = ["PATH", "30", "33"]


@pytest.mark.parametrize("version", VERSIONS)
def test_get_through_port_forward_returns_the_nginx_page(forward: _Forwards, version: str) -> None:
    port = forward.start("pod/web", 80, version=version).local
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=30) as response:
        assert response.status == 200
        assert "Welcome to nginx!" in response.read().decode()


@pytest.mark.parametrize("version", VERSIONS)
def test_megabytes_echo_both_ways_on_concurrent_connections(
    forward: _Forwards, version: str
) -> None:
    port = forward.start("pod/echo", ECHO_PORT, version=version).local
    payloads = [os.urandom(PAYLOAD_BYTES) for _ in range(CONNECTIONS)]
    with ThreadPoolExecutor(CONNECTIONS) as pool:
        echoed = list(pool.map(lambda p: echo_through(port, p), payloads))
    assert [len(e) for e in echoed] == [PAYLOAD_BYTES] * CONNECTIONS
    assert echoed == payloads


@pytest.mark.parametrize("version", ["PATH", "30"])
def test_a_port_nothing_listens_on_reports_the_kubelet_error(
    forward: _Forwards, version: str
) -> None:
    forwarded = forward.start("pod/echo", CLOSED_PORT, version=version)
    session, port = forwarded.session, forwarded.local
    with socket.create_connection(("127.0.0.1", port), timeout=30) as conn:
        assert conn.recv(1) == b""  # the forward closes the connection it cannot serve
    # kubectl prints the error stream and, as client-go has done since 1.24, ends the session
    # it came on ("lost connection to pod") — the kubelet keeps it; see the kubelet tests
    code = session.proc.wait(timeout=60)
    stderr = session.proc.stderr.read() if session.proc.stderr else ""
    assert code == 1, stderr
    assert f"an error occurred forwarding {port} -> {CLOSED_PORT}: error forwarding port " in stderr
    assert f"{CLOSED_PORT}: connect: connection refused" in stderr
    assert "lost connection to pod" in stderr


def test_deployment_resolves_to_one_of_its_pods(
    forward: _Forwards, node: Node, tmp_path: Path
) -> None:
    kubectl = Kubectl.on(node.server, workdir=tmp_path)
    kubectl.apply(
        factories.deployment("web-deploy", replicas=1, labels={"app": "web"}), "--validate=false"
    )
    port = forward.start("deploy/web-deploy", 80).local
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/index.html", timeout=30) as response:
        assert "Welcome to nginx!" in response.read().decode()


def test_service_resolves_its_target_port(forward: _Forwards, node: Node, tmp_path: Path) -> None:
    if REGISTRY.get("", "v1", "services") is None:
        pytest.skip("the apiserver serves no Service kind yet (core/v1 services)")
    kubectl = Kubectl.on(node.server, workdir=tmp_path)
    kubectl.apply(
        factories.service(
            "web-svc", selector={"app": "web"}, ports=[{"port": 8080, "targetPort": 80}]
        ),
        "--validate=false",
    )
    # kubectl maps the Service's port 8080 to its targetPort 80 on a pod the selector picks
    forwarded = forward.start("svc/web-svc", 8080)
    assert forwarded.remote == 80
    with urllib.request.urlopen(f"http://127.0.0.1:{forwarded.local}/", timeout=30) as response:
        assert "Welcome to nginx!" in response.read().decode()


def test_kubectl_without_the_pod_says_not_found(node: Node, tmp_path: Path) -> None:
    kubectl = Kubectl.on(node.server, workdir=tmp_path)
    done = kubectl("port-forward", "pod/absent", ":80", check=False)
    assert done.returncode == 1
    assert 'pods "absent" not found' in done.stderr
