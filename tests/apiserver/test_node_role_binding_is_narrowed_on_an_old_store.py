"""A store from before the Node authorizer: its node-wide binding is removed at the next start.

Earlier kubelite versions bound the ``system:node`` ClusterRole to the group ``system:nodes``,
which would let every kubelet read every Secret past the Node authorizer. The bootstrap
reconciliation removes that subject (and only it) when the apiserver starts on such a store;
a binding an administrator made to the same group under another name is left alone.
"""

from __future__ import annotations

import json
import urllib.request
from typing import Any

from kubelite.testing import Processes

BINDINGS = "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings"
NODES_GROUP = {"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": "system:nodes"}


def call(url: str, method: str = "GET", body: Any = None) -> dict[str, Any]:
    data = json.dumps(body).encode() if body is not None else None
    patch = method == "PATCH"
    headers = {"Content-Type": "application/merge-patch+json" if patch else "application/json"}
    request = urllib.request.Request(url, data=data, headers=headers, method=method)
    with urllib.request.urlopen(request, timeout=30) as response:
        answer = json.loads(response.read())
    assert isinstance(answer, dict)
    return answer


def test_the_system_nodes_group_leaves_the_system_node_binding_at_restart(
    kubelite_processes: Processes,
) -> None:
    server = kubelite_processes.apiserver()  # SQLite: the store outlives the process
    assert call(server.url + f"{BINDINGS}/system:node").get("subjects") in (None, [])
    old = {"subjects": [NODES_GROUP, {**NODES_GROUP, "name": "ops"}]}
    call(server.url + f"{BINDINGS}/system:node", "PATCH", old)
    mine = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": "nodes-read-all"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
        "subjects": [NODES_GROUP],
    }
    call(server.url + BINDINGS, "POST", mine)

    server.restart()

    narrowed = call(server.url + f"{BINDINGS}/system:node")
    assert narrowed["subjects"] == [{**NODES_GROUP, "name": "ops"}]
    assert call(server.url + f"{BINDINGS}/nodes-read-all")["subjects"] == [NODES_GROUP]
