"""A kubelet's identity reaches only its own node: the Node authorizer and NodeRestriction.

One real apiserver serves its secure port (default ``--authorization-mode=Node,RBAC``); the
admin sets up, on the plain loopback port, two nodes with their Leases, a pod bound to each
(node1's reads Secret ``s1`` as a volume, ConfigMap ``c1`` as env and claim ``claim1``, bound
to volume ``pv1``; node2's reads ``s2``), a Secret no pod references and a volume bound to
another claim. Then, over HTTPS with ``system:node:node1``'s client certificate
(group ``system:nodes``), each attempt is counted:

* refused, 403 with Kubernetes' words: another node's pod's Secret, an unreferenced Secret,
  every Secret at once, a volume bound to no claim of its pods, another node's Node and Lease (patch, delete, create one named for it),
  a ``node-restriction.kubernetes.io/`` label on its own Node, a Lease outside
  ``kube-node-lease``, the status, deletion and eviction of a pod bound to another node, an
  update of its own pod's spec (no node rule grants it);
* allowed: its own pod's Secret and ConfigMap (get, and watch by name as the kubelet does), its
  claim and the volume bound to it, its own Node's labels, its own Lease, its own pod's status, and deleting its own pod;
* followed: a pod's Secret becomes readable when the pod is bound to the node, stays so across
  the pod's status writes, and is refused again once the pod is gone.
"""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

import pytest

from component import pki
from kubelite.testing import ComponentProcess, Processes
from kubelite.testing.waiting import poll_until
from tests.factories import container, node, pod

Obj = dict[str, Any]
PODS = "/api/v1/namespaces/default/pods"
SECRETS = "/api/v1/namespaces/default/secrets"
CLAIMS = "/api/v1/namespaces/default/persistentvolumeclaims"
LEASES = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"


@dataclass(frozen=True)
class Answer:
    code: int
    body: Any


@dataclass(frozen=True)
class Cluster:
    server: ComponentProcess
    node1: pki.KeyPair

    def call(self, method: str, path: str, body: Any = None, *, admin: bool = False) -> Answer:
        """``method path`` as node1 over HTTPS, or as the admin on the plain port."""
        headers = {"Accept": "application/json"}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            patch = "application/merge-patch+json"
            headers["Content-Type"] = patch if method == "PATCH" else "application/json"
        context = None
        url = self.server.url
        if not admin:
            assert self.server.state_dir is not None
            context = ssl.create_default_context(cafile=self.server.state_dir / "pki" / "ca.crt")
            context.load_cert_chain(self.node1.cert, self.node1.key)
            url = f"https://127.0.0.1:{self.server.port_of('secure')}"
        request = urllib.request.Request(url + path, data=data, headers=headers, method=method)
        try:
            with urllib.request.urlopen(request, context=context, timeout=30) as response:
                raw, code = response.read(), response.status
        except urllib.error.HTTPError as err:
            with err:
                raw, code = err.read(), err.code
        streamed = "watch=1" in path
        return Answer(code, json.loads(raw) if raw and not streamed else raw)

    def admin(self, method: str, path: str, body: Any = None) -> Obj:
        answer = self.call(method, path, body, admin=True)
        assert 200 <= answer.code < 300, answer
        body = answer.body
        assert isinstance(body, dict)
        return body


def lease(name: str) -> Obj:
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": name},
        "spec": {"holderIdentity": name, "leaseDurationSeconds": 40},
    }


def claim(name: str) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "1Gi"}},
            "storageClassName": "",
        },
    }


def volume(name: str, *, claim: str) -> Obj:
    """A volume whose ``claimRef`` binds it to ``default/<claim>``."""
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name},
        "spec": {
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOnce"],
            "hostPath": {"path": f"/tmp/{name}"},
            "claimRef": {"namespace": "default", "name": claim},
        },
    }


def secret(name: str) -> Obj:
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}, "data": {}}


@pytest.fixture(scope="module")
def cluster(session_processes: Processes, tmp_path_factory: pytest.TempPathFactory) -> Cluster:
    server = session_processes.apiserver(store="memory://", secure=True)
    assert server.state_dir is not None
    ca = pki.ensure_ca(server.state_dir / "pki")
    node1 = pki.ensure_client_cert(
        ca,
        tmp_path_factory.mktemp("node1"),
        name="node1",
        user="system:node:node1",
        groups=["system:nodes"],
    )
    ours = Cluster(server, node1)
    for name in ("node1", "node2"):
        ours.admin("POST", "/api/v1/nodes", node(name))
        ours.admin("POST", LEASES, lease(name))
    for name in ("s1", "s2", "unused"):
        ours.admin("POST", SECRETS, secret(name))
    ours.admin("POST", CLAIMS, claim("claim1"))
    ours.admin("POST", "/api/v1/persistentvolumes", volume("pv1", claim="claim1"))
    ours.admin("POST", "/api/v1/persistentvolumes", volume("pv2", claim="elsewhere"))
    config = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c1"}, "data": {}}
    ours.admin("POST", "/api/v1/namespaces/default/configmaps", config)
    env = {"name": "C", "valueFrom": {"configMapKeyRef": {"name": "c1", "key": "k"}}}
    p1 = pod("p1", container(env=[env]), nodeName="node1")
    p1["spec"]["volumes"] = [
        {"name": "s", "secret": {"secretName": "s1"}},
        {"name": "data", "persistentVolumeClaim": {"claimName": "claim1"}},
    ]
    p2 = pod("p2", nodeName="node2")
    p2["spec"]["volumes"] = [{"name": "s", "secret": {"secretName": "s2"}}]
    for body in (p1, p2):
        ours.admin("POST", PODS, body)
    return ours


def running(name: str) -> Obj:
    return {"status": {"phase": "Running", "message": f"{name} runs"}}


def test_a_node_is_refused_what_is_not_its_own(cluster: Cluster) -> None:
    # the first allowed read waits for the pod to be in the authorizer's watch cache
    poll_until(lambda: cluster.call("GET", f"{SECRETS}/s1").code == 200, what="node1 reads s1")
    refused = {
        "another node's pod's secret": cluster.call("GET", f"{SECRETS}/s2"),
        "an unreferenced secret": cluster.call("GET", f"{SECRETS}/unused"),
        "a volume bound to no claim of its pods": cluster.call(
            "GET", "/api/v1/persistentvolumes/pv2"
        ),
        "every secret": cluster.call("GET", SECRETS),
        "another node": cluster.call(
            "PATCH", "/api/v1/nodes/node2", {"metadata": {"labels": {"a": "b"}}}
        ),
        "a restricted label": cluster.call(
            "PATCH",
            "/api/v1/nodes/node1",
            {"metadata": {"labels": {"node-restriction.kubernetes.io/pool": "gold"}}},
        ),
        "another node's lease": cluster.call(
            "PATCH", f"{LEASES}/node2", {"spec": {"holderIdentity": "node1"}}
        ),
        "deleting another node's lease": cluster.call("DELETE", f"{LEASES}/node2"),
        "creating a lease for another node": cluster.call("POST", LEASES, lease("node3")),
        "a lease elsewhere": cluster.call(
            "POST", "/apis/coordination.k8s.io/v1/namespaces/default/leases", lease("node1")
        ),
        "another node's pod status": cluster.call("PATCH", f"{PODS}/p2/status", running("p2")),
        "deleting another node's pod": cluster.call("DELETE", f"{PODS}/p2"),
        "evicting another node's pod": cluster.call(
            "POST",
            f"{PODS}/p2/eviction",
            {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "p2"}},
        ),
        "its own pod's spec": cluster.call(
            "PATCH", f"{PODS}/p1", {"metadata": {"labels": {"a": "b"}}}
        ),
    }
    assert {what: a.code for what, a in refused.items()} == dict.fromkeys(refused, 403)
    assert len(refused) == 14

    messages = {what: a.body["message"] for what, a in refused.items()}
    user = 'User "system:node:node1"'
    assert messages["another node's pod's secret"] == (
        f'secrets "s2" is forbidden: {user} cannot get resource "secrets" in API group "" in '
        "the namespace \"default\": no relationship found between node 'node1' and this object"
    )
    assert messages["every secret"].endswith(": No Object name found")
    assert messages["another node"] == (
        'nodes "node2" is forbidden: node "node1" is not allowed to modify node "node2"'
    )
    assert messages["a restricted label"] == (
        'nodes "node1" is forbidden: is not allowed to modify labels: '
        "node-restriction.kubernetes.io/pool"
    )
    assert messages["another node's lease"].endswith(
        ": can only access node lease with the same name as the requesting node"
    )
    assert messages["creating a lease for another node"] == (
        'leases.coordination.k8s.io "node3" is forbidden: can only access node lease with the '
        "same name as the requesting node"
    )
    assert messages["another node's pod status"] == (
        'pods "p2" is forbidden: node "node1" can only update pod status for pods with '
        "spec.nodeName set to itself"
    )
    assert messages["deleting another node's pod"] == (
        'pods "p2" is forbidden: node "node1" can only delete pods with spec.nodeName set to itself'
    )
    assert messages["evicting another node's pod"] == (
        'pods "p2" is forbidden: node node1 can only evict pods with spec.nodeName set to itself'
    )
    assert messages["its own pod's spec"] == (  # the node rules grant no pod update at all
        f'pods "p1" is forbidden: {user} cannot patch resource "pods" in API group "" in the '
        'namespace "default"'
    )

    # nothing refused was written
    assert cluster.admin("GET", "/api/v1/nodes/node2")["metadata"]["labels"] == {
        "kubernetes.io/hostname": "node2"
    }
    assert cluster.admin("GET", f"{LEASES}/node2")["spec"]["holderIdentity"] == "node2"
    assert cluster.admin("GET", f"{PODS}/p2").get("status", {}).get("phase") != "Running"


def test_a_node_is_allowed_its_own(cluster: Cluster) -> None:
    poll_until(lambda: cluster.call("GET", f"{SECRETS}/s1").code == 200, what="node1 reads s1")
    watch = "?fieldSelector=metadata.name%3Ds1&watch=1&timeoutSeconds=1"
    allowed = {
        "its pod's secret": cluster.call("GET", f"{SECRETS}/s1"),
        "its pod's secret, watched by name": cluster.call("GET", SECRETS + watch),
        "its pod's configmap": cluster.call("GET", "/api/v1/namespaces/default/configmaps/c1"),
        "its pod's claim": cluster.call("GET", f"{CLAIMS}/claim1"),
        "its claim's volume": cluster.call("GET", "/api/v1/persistentvolumes/pv1"),
        "its node's labels": cluster.call(
            "PATCH", "/api/v1/nodes/node1", {"metadata": {"labels": {"node.kubernetes.io/x": "y"}}}
        ),
        "its lease": cluster.call(
            "PATCH", f"{LEASES}/node1", {"spec": {"leaseDurationSeconds": 41}}
        ),
        "its pod's status": cluster.call("PATCH", f"{PODS}/p1/status", running("p1")),
        "deleting its pod": cluster.call("DELETE", f"{PODS}/p1"),
    }
    assert {what: a.code for what, a in allowed.items()} == dict.fromkeys(allowed, 200)
    assert len(allowed) == 9
    assert cluster.admin("GET", f"{LEASES}/node1")["spec"]["leaseDurationSeconds"] == 41


def test_a_nodes_access_follows_its_pods_binding_and_deletion(cluster: Cluster) -> None:
    cluster.admin("POST", SECRETS, secret("later"))
    p3 = pod("p3")
    p3["spec"]["volumes"] = [{"name": "s", "secret": {"secretName": "later"}}]
    cluster.admin("POST", PODS, p3)
    assert cluster.call("GET", f"{SECRETS}/later").code == 403  # p3 is bound to no node yet
    binding = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": "p3"},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "node1"},
    }
    cluster.admin("POST", f"{PODS}/p3/binding", binding)
    poll_until(lambda: cluster.call("GET", f"{SECRETS}/later").code == 200, what="p3 bound")
    assert cluster.call("PATCH", f"{PODS}/p3/status", running("p3")).code == 200
    assert cluster.call("GET", f"{SECRETS}/later").code == 200  # a new version, the same refs
    cluster.admin("DELETE", f"{PODS}/p3", {"gracePeriodSeconds": 0})
    poll_until(lambda: cluster.call("GET", f"{SECRETS}/later").code == 403, what="p3 gone")
