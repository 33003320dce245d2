"""kubectl get as the seed uses it: pods -o wide, nodes --show-labels, label nodes, events, -A, -n."""

from __future__ import annotations

import re

import pytest

from tests import factories
from tests.kubectl.harness import Kubectl

pytestmark = pytest.mark.kubectl


def _table(out: str) -> tuple[list[str], list[list[str]]]:
    """Header and rows of kubectl's column output; headers may hold one space ("NOMINATED NODE")."""
    lines = out.splitlines()
    split = re.compile(r"\s{2,}")
    return split.split(lines[0].strip()), [split.split(line.strip()) for line in lines[1:]]


def test_get_pods_wide_shows_node_and_status(kubectl: Kubectl) -> None:
    kubectl.apply(factories.namespace("wide"))
    kubectl.apply(
        factories.sleeper("placed", image="busybox:1.36", nodeName="node1"),
        "-n",
        "wide",
    )
    kubectl.apply(factories.sleeper("pending", image="busybox:1.36"), "-n", "wide")
    header, rows = _table(kubectl("get", "pods", "-o", "wide", "-n", "wide").stdout)
    assert header == [
        "NAME",
        "READY",
        "STATUS",
        "RESTARTS",
        "AGE",
        "IP",
        "NODE",
        "NOMINATED NODE",
        "READINESS GATES",
    ]
    by_name = {row[0]: row for row in rows}
    assert by_name["placed"][1:4] == ["0/1", "Pending", "0"]
    assert by_name["placed"][5:] == ["<none>", "node1", "<none>", "<none>"]
    assert by_name["pending"][6] == "<none>"

    narrow_header, _ = _table(kubectl("get", "po", "-n", "wide").stdout)
    assert narrow_header == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]


def test_label_nodes_and_show_labels(kubectl: Kubectl) -> None:
    kubectl.apply(
        factories.node("label-node", ready=None, labels={"node-role.kubernetes.io/worker": ""})
    )
    labeled = kubectl("label", "nodes", "label-node", "zz=cxk")
    assert labeled.stdout.strip() == "node/label-node labeled"

    header, rows = _table(kubectl("get", "nodes", "label-node", "--show-labels").stdout)
    assert header == ["NAME", "STATUS", "ROLES", "AGE", "VERSION", "LABELS"]
    assert rows[0][0] == "label-node"
    assert rows[0][1] == "Unknown"  # no kubelet reports a Ready condition
    assert rows[0][2] == "worker"
    assert "zz=cxk" in rows[0][-1].split(",")

    refused = kubectl("label", "nodes", "label-node", "zz=other", check=False)
    assert refused.returncode == 1
    assert "already has a value (cxk)" in refused.stderr

    overwritten = kubectl("label", "nodes", "label-node", "zz=other", "--overwrite")
    assert overwritten.stdout.strip() == "node/label-node labeled"
    assert "zz=other" in kubectl("get", "no", "label-node", "--show-labels").stdout

    removed = kubectl("label", "nodes", "label-node", "zz-")
    assert removed.stdout.strip() == "node/label-node unlabeled"
    assert "zz=" not in kubectl("get", "nodes", "label-node", "--show-labels").stdout


def test_get_events(kubectl: Kubectl) -> None:
    kubectl.apply(factories.namespace("events"))
    kubectl(
        "create",
        "-f",
        "-",
        stdin=factories.yaml_of(factories.event("seen.1", pod="demo", namespace="events")),
    )
    header, rows = _table(kubectl("get", "events", "-n", "events").stdout)
    assert header == ["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    assert rows[0][1:] == ["Normal", "Started", "pod/demo", "Started container main"]
    wide_header, wide_rows = _table(kubectl("get", "ev", "-n", "events", "-o", "wide").stdout)
    assert wide_header[4:6] == ["SUBOBJECT", "SOURCE"]
    assert wide_rows[0][4:6] == ["spec.containers{main}", "kubelet, node1"]


def test_all_namespaces_and_namespace_flags(kubectl: Kubectl) -> None:
    for ns in ("team-a", "team-b"):
        kubectl.apply(factories.namespace(ns))
        kubectl.apply(factories.sleeper(f"pod-{ns}", image="busybox:1.36"), "-n", ns)
    header, rows = _table(kubectl("get", "pods", "-A").stdout)
    assert header[:2] == ["NAMESPACE", "NAME"]
    pairs = {(row[0], row[1]) for row in rows}
    assert {("team-a", "pod-team-a"), ("team-b", "pod-team-b")} <= pairs

    _, only_a = _table(kubectl("get", "pods", "-n", "team-a").stdout)
    assert [row[0] for row in only_a] == ["pod-team-a"]
    ns_header, ns_rows = _table(kubectl("get", "ns").stdout)
    assert ns_header == ["NAME", "STATUS", "AGE"]
    assert {"team-a", "team-b"} <= {row[0] for row in ns_rows}
