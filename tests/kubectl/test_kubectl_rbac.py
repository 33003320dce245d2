"""Stock kubectl with the RBAC kinds: ``create role|clusterrole|rolebinding|clusterrolebinding``
(whose bodies kubectl sends as protobuf), ``get`` printing Kubernetes' columns (roles ``NAME
CREATED AT`` in RFC 3339, bindings ``NAME ROLE AGE`` and, wide, ``USERS GROUPS
SERVICEACCOUNTS``), and ``describe clusterrole view`` once the controller-manager's
clusterrole-aggregation controller has filled it."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from kubelite.testing import Processes
from kubelite.testing.waiting import poll_until
from tests.kubectl.harness import Kubectl

pytestmark = pytest.mark.kubectl

RFC3339 = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")


def rows(output: str) -> list[list[str]]:
    """``kubectl get`` output split into cells (columns are separated by 2+ spaces)."""
    return [re.split(r"\s{2,}", line.strip()) for line in output.strip().splitlines()]


def get_json(kubectl: Kubectl, *args: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(kubectl("get", *args, "-o", "json").stdout)
    return loaded


def test_create_and_get_roles_and_bindings(kubectl: Kubectl) -> None:
    kubectl("create", "namespace", "rbac-kubectl")
    ns = ("-n", "rbac-kubectl")
    created = [
        kubectl("create", "role", "pod-reader", *ns, "--verb=get,list",
                "--resource=pods,deployments.apps", "--resource-name=web"),
        kubectl("create", "clusterrole", "rbac-kubectl-logs", "--verb=get",
                "--non-resource-url=/logs/*"),
        kubectl("create", "clusterrole", "rbac-kubectl-agg",
                "--aggregation-rule=rbac-kubectl=true"),
        kubectl("create", "rolebinding", "readers", *ns, "--role=pod-reader", "--user=alice",
                "--group=devs", "--serviceaccount=rbac-kubectl:robot"),
        kubectl("create", "rolebinding", "viewers", *ns, "--clusterrole=view", "--user=bob"),
        kubectl("create", "clusterrolebinding", "rbac-kubectl-logs",
                "--clusterrole=rbac-kubectl-logs", "--group=ops"),
    ]  # fmt: skip
    assert [c.stdout.strip() for c in created] == [
        "role.rbac.authorization.k8s.io/pod-reader created",
        "clusterrole.rbac.authorization.k8s.io/rbac-kubectl-logs created",
        "clusterrole.rbac.authorization.k8s.io/rbac-kubectl-agg created",
        "rolebinding.rbac.authorization.k8s.io/readers created",
        "rolebinding.rbac.authorization.k8s.io/viewers created",
        "clusterrolebinding.rbac.authorization.k8s.io/rbac-kubectl-logs created",
    ]

    role = get_json(kubectl, "role", "pod-reader", *ns)
    assert role["rules"] == [
        {"apiGroups": [""], "resources": ["pods"], "resourceNames": ["web"],
         "verbs": ["get", "list"]},
        {"apiGroups": ["apps"], "resources": ["deployments"], "resourceNames": ["web"],
         "verbs": ["get", "list"]},
    ]  # fmt: skip
    logs = get_json(kubectl, "clusterrole", "rbac-kubectl-logs")
    assert logs["rules"] == [{"nonResourceURLs": ["/logs/*"], "verbs": ["get"]}]
    agg = get_json(kubectl, "clusterrole", "rbac-kubectl-agg")
    assert agg["aggregationRule"] == {
        "clusterRoleSelectors": [{"matchLabels": {"rbac-kubectl": "true"}}]
    }
    readers = get_json(kubectl, "rolebinding", "readers", *ns)
    assert readers["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pod-reader"
    }  # fmt: skip
    assert readers["subjects"] == [
        {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "alice"},
        {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "devs"},
        {"kind": "ServiceAccount", "name": "robot", "namespace": "rbac-kubectl"},
    ]

    table = rows(kubectl("get", "role", *ns).stdout)
    assert table[0] == ["NAME", "CREATED AT"]
    assert table[1][0] == "pod-reader" and RFC3339.match(table[1][1]), table

    table = rows(kubectl("get", "rolebinding", *ns).stdout)
    assert table[0] == ["NAME", "ROLE", "AGE"]
    assert {r[0]: r[1] for r in table[1:]} == {"readers": "Role/pod-reader",
                                              "viewers": "ClusterRole/view"}  # fmt: skip

    wide = rows(kubectl("get", "rolebinding", "readers", *ns, "-o", "wide").stdout)
    assert wide[0] == ["NAME", "ROLE", "AGE", "USERS", "GROUPS", "SERVICEACCOUNTS"]
    assert [wide[1][i] for i in (0, 1, 3, 4, 5)] == [
        "readers", "Role/pod-reader", "alice", "devs", "rbac-kubectl/robot"
    ]  # fmt: skip

    everything = kubectl("get", "role,rolebinding,clusterrole,clusterrolebinding", *ns).stdout
    assert re.search(r"^role\.rbac\.authorization\.k8s\.io/pod-reader\s+\S+Z$", everything, re.M)
    assert re.search(
        r"^clusterrole\.rbac\.authorization\.k8s\.io/view\s+\S+Z$", everything, re.M
    ), everything
    assert re.search(
        r"^clusterrolebinding\.rbac\.authorization\.k8s\.io/rbac-kubectl-logs\s+"
        r"ClusterRole/rbac-kubectl-logs\s",
        everything,
        re.M,
    ), everything
    assert re.search(
        r"^clusterrolebinding\.rbac\.authorization\.k8s\.io/cluster-admin\s+"
        r"ClusterRole/cluster-admin\s",
        everything,
        re.M,
    ), everything


def test_describe_clusterrole_view_lists_the_aggregated_rules(
    kubelite_processes: Processes, tmp_path: Path
) -> None:
    api = kubelite_processes.apiserver(store="memory://")
    kubelite_processes.controller_manager(
        api.url, args=["--controllers=clusterrole-aggregation", "--leader-elect=false"]
    )
    kubectl = Kubectl.on(api.url, workdir=tmp_path)

    def view_filled() -> bool:
        return bool(get_json(kubectl, "clusterrole", "view").get("rules"))

    poll_until(view_filled, what="view aggregated by the controller-manager")
    described = kubectl("describe", "clusterrole", "view").stdout
    assert described.startswith("Name:         view\n"), described
    assert "rbac.authorization.k8s.io/aggregate-to-edit=true" in described
    assert "Annotations:  rbac.authorization.kubernetes.io/autoupdate: true" in described
    header = re.search(r"^\s+Resources\s+Non-Resource URLs\s+Resource Names\s+Verbs$",
                       described, re.M)  # fmt: skip
    assert header, described
    assert re.search(r"^\s+pods\s+\[\]\s+\[\]\s+\[get list watch\]$", described, re.M), described
    assert re.search(r"^\s+deployments\.apps\s+\[\]\s+\[\]\s+\[get list watch\]$",
                     described, re.M), described  # fmt: skip
