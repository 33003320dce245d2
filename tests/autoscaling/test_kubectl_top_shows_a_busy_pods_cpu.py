"""``kubectl top pods|nodes`` (the stock kubectl) show what the kubelets measured.

A real cluster (``kubelite up``'s processes, the process runtime) runs a pod spinning a Python
busy loop and a pod that sleeps. The apiserver's ``metrics.k8s.io`` scrapes the kubelets'
``/stats/summary``; ``kubectl top pods`` must show the busy pod using CPU (a spinning process
uses close to a core; the test asks only for more than zero and more than the sleeper), ``--containers`` its
container, and ``kubectl top nodes`` every node; the PodMetrics object itself is read as the
HPA controller reads it.
"""

from __future__ import annotations

import pytest

from api.quantity import parse_quantity
from kubelite.testing.waiting import apoll_until
from tests import factories
from tests.e2e.cluster import Cluster, running
from tests.kubectl.harness import Kubectl

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

BUSY = factories.pod(
    "busy",
    factories.container(
        "spin", "python", cpu="100m", command=["python3", "-c", "while True: pass"]
    ),
    labels={"app": "busy"},
)
IDLE = factories.pod("idle", factories.sh("sleep 3600", name="sleeper"), labels={"app": "idle"})


def rows(output: str) -> dict[str, list[str]]:
    """``kubectl top`` output as its rows' cells, by the first cell."""
    lines = [line.split() for line in output.splitlines() if line.strip()]
    return {cells[0]: cells for cells in lines[1:]}


def millicores(cell: str) -> int:
    return int(parse_quantity(cell) * 1000)


async def test_kubectl_top_pods_shows_the_busy_pod_using_cpu(
    cluster: Cluster, kubectl: Kubectl
) -> None:
    kubectl.apply(BUSY)
    kubectl.apply(IDLE)
    await cluster.until(
        lambda: running(cluster.pod("busy")) and running(cluster.pod("idle")),
        within=90,
        what="both pods Running",
    )

    async def top() -> dict[str, list[str]] | None:
        done = kubectl("top", "pods", check=False)
        table = rows(done.stdout) if done.returncode == 0 else {}
        return table if {"busy", "idle"} <= table.keys() else None

    table = await apoll_until(top, what="kubectl top pods listing both pods", within=90)
    assert millicores(table["busy"][1]) > 0, table
    assert millicores(table["busy"][1]) > millicores(table["idle"][1]), table
    assert parse_quantity(table["busy"][2]) > 0, table  # a Python process's resident memory

    selected = rows(kubectl("top", "pods", "-l", "app=busy", "--containers").stdout)
    assert list(selected) == ["busy"], selected
    assert selected["busy"][1] == "spin", selected

    nodes = rows(kubectl("top", "nodes").stdout)
    assert set(nodes) == set(cluster.nodes), nodes
    busy_node = (cluster.pod("busy") or {})["spec"]["nodeName"]
    assert millicores(nodes[busy_node][1]) > 0, nodes

    metrics = await cluster.client.request(
        "GET", "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods/busy"
    )
    assert metrics["kind"] == "PodMetrics"
    assert [c["name"] for c in metrics["containers"]] == ["spin"]
