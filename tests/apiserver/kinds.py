"""One object of each kind the apiserver serves, and the collection it is created in.

The CRUD tests (in-process and against the real process) walk this table, so a kind added to
the apiserver is added here once.
"""

from __future__ import annotations

from typing import Any

from tests.factories import pod

TEMPLATE = {
    "metadata": {"labels": {"app": "web"}},
    "spec": {"containers": [{"name": "main", "image": "nginx"}]},
}

# (collection path, item path prefix, body) per kind
KINDS: dict[str, tuple[str, dict[str, Any]]] = {
    "Pod": ("/api/v1/namespaces/default/pods", pod("x")),
    "Node": (
        "/api/v1/nodes",
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "x", "labels": {"zz": "cxk"}}},
    ),
    "Namespace": (
        "/api/v1/namespaces",
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x"}},
    ),
    "Event": (
        "/api/v1/namespaces/default/events",
        {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": "x"},
            "involvedObject": {"kind": "Pod", "namespace": "default", "name": "p"},
            "reason": "Scheduled",
            "message": "hello",
            "type": "Normal",
        },
    ),
    "ReplicationController": (
        "/api/v1/namespaces/default/replicationcontrollers",
        {
            "apiVersion": "v1",
            "kind": "ReplicationController",
            "metadata": {"name": "x"},
            "spec": {"replicas": 2, "selector": {"app": "web"}, "template": TEMPLATE},
        },
    ),
    "ReplicaSet": (
        "/apis/apps/v1/namespaces/default/replicasets",
        {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {"name": "x"},
            "spec": {
                "replicas": 2,
                "selector": {"matchLabels": {"app": "web"}},
                "template": TEMPLATE,
            },
        },
    ),
    "Deployment": (
        "/apis/apps/v1/namespaces/default/deployments",
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "x"},
            "spec": {
                "replicas": 2,
                "selector": {"matchLabels": {"app": "web"}},
                "template": TEMPLATE,
            },
        },
    ),
    "Lease": (
        "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases",
        {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": "x"},
            "spec": {"holderIdentity": "node1", "leaseDurationSeconds": 40},
        },
    ),
}
