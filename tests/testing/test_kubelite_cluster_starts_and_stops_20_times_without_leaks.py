"""The ``kubelite_cluster`` fixture, enabled by kubelite's ``pytest11`` entry point, starts and
stops a cluster 20 times in one pytest run and leaves no process, port or thread behind.

The inner run is a real pytest session (``pytester``, in this process, so its clusters' threads
and sockets are this process's): 19 tests get the apiserver alone and write down its port, one
also gets the controller-manager, the scheduler and a sim kubelet (subprocesses) and checks a
pod is scheduled and runs. Afterwards this process has the children, threads and listening
sockets it had before, and every recorded port refuses connections.
"""

from __future__ import annotations

import socket
import threading

import psutil
import pytest

pytest_plugins = ["pytester"]

INNER = """
import json
import urllib.request
from pathlib import Path

import pytest

from kubelite.testing.waiting import poll_until

PORTS = Path(__file__).parent / "ports.txt"


def get(url):
    with urllib.request.urlopen(url, timeout=10) as resp:
        return json.loads(resp.read())


@pytest.mark.parametrize("n", range(19))
def test_apiserver_alone(kubelite_cluster, n):
    assert get(kubelite_cluster.url + "/api/v1/namespaces/default")["metadata"]["name"] == "default"
    assert kubelite_cluster.kubeconfig.exists()
    with PORTS.open("a") as out:
        out.write(kubelite_cluster.url.rsplit(":", 1)[1] + "\\n")


@pytest.mark.kubelite(controllers=True, scheduler=True, kubelet=True)
def test_whole_control_plane(kubelite_cluster):
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "main", "image": "nginx"}]},
    }
    request = urllib.request.Request(
        kubelite_cluster.url + "/api/v1/namespaces/default/pods",
        data=json.dumps(pod).encode(),
        headers={"Content-Type": "application/json"},
    )
    urllib.request.urlopen(request, timeout=10).close()
    path = kubelite_cluster.url + "/api/v1/namespaces/default/pods/p"
    poll_until(lambda: get(path)["status"].get("phase") == "Running", what="the pod to run", within=60)
    with PORTS.open("a") as out:
        out.write(kubelite_cluster.url.rsplit(":", 1)[1] + "\\n")
"""


def listening_ports() -> set[int]:
    return {c.laddr.port for c in psutil.Process().net_connections("inet") if c.status == "LISTEN"}


def refuses(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) != 0


@pytest.mark.e2e
def test_twenty_clusters_leave_nothing_behind(pytester: pytest.Pytester) -> None:
    me = psutil.Process()
    children = {p.pid for p in me.children(recursive=True)}
    threads = {t.ident for t in threading.enumerate()}
    listening = listening_ports()

    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makepyfile(test_inner=INNER)
    result = pytester.runpytest_inprocess("-q", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=20)

    ports = [int(p) for p in (pytester.path / "ports.txt").read_text().split()]
    assert len(ports) == 20
    assert [p for p in ports if not refuses(p)] == []
    assert listening_ports() <= listening
    assert {p.pid for p in me.children(recursive=True)} <= children
    assert [t.name for t in threading.enumerate() if t.ident not in threads] == []
