"""A pod talks to the apiserver as its service account, from inside the cluster.

A whole cluster as ``kubelite up`` runs it (TLS on the secure port, the proxy forwarding
ClusterIPs, the controller-manager publishing ``kube-root-ca.crt``), every component its own
process, pods on the process runtime:

* a ``python`` pod whose account ``lister`` is bound to a Role that may only list pods runs the
  official client's ``load_incluster_config()`` — token, CA and namespace from
  ``/var/run/secrets/kubernetes.io/serviceaccount``, the apiserver from
  ``KUBERNETES_SERVICE_HOST``/``PORT`` (the ``kubernetes`` Service's ClusterIP, through the
  proxy, over TLS checked against the projected CA) — lists its namespace's pods and is refused
  the Secrets (403);
* a ``busybox`` pod shows its projected files: ``namespace`` is its namespace, ``ca.crt`` the
  cluster's CA, ``token`` a JWT the apiserver's TokenReview accepts as
  ``system:serviceaccount:<ns>:default`` bound to that pod (its name and uid in ``extra``),
  laid out by the atomic writer (``..data``); the ``kubernetes`` Service's variables are in its
  environment; a pod with ``automountServiceAccountToken: false`` has none of it.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from api.registry import REGISTRY
from kubelite.testing.waiting import Watcher
from tests.e2e.cluster import Cluster, phase
from tests.factories import container, namespace, pod, policy_rule, role, role_binding

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(300)]

Obj = dict[str, Any]
NS = "team"
SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
NAMESPACES = REGISTRY.require("", "Namespace")
ACCOUNTS = REGISTRY.require("", "ServiceAccount")
PODS = REGISTRY.require("", "Pod")
ROLES = REGISTRY.require("rbac.authorization.k8s.io", "Role")
BINDINGS = REGISTRY.require("rbac.authorization.k8s.io", "RoleBinding")
SERVICES = REGISTRY.require("", "Service")

IN_CLUSTER = """
from kubernetes import client, config
from kubernetes.client.rest import ApiException

SA_DIR = "%SA_DIR%"
config.load_incluster_config()
namespace = open(SA_DIR + "/namespace").read()
api = client.CoreV1Api()
names = sorted(p.metadata.name for p in api.list_namespaced_pod(namespace).items)
print("pods:", ",".join(names), flush=True)
try:
    api.list_namespaced_secret(namespace)
    print("secrets: listed", flush=True)
except ApiException as exc:
    print("secrets:", exc.status, flush=True)
""".replace("%SA_DIR%", SA_DIR)

SHOW_FILES = f"""
echo "namespace=$(cat {SA_DIR}/namespace)"
echo "entries=$(ls -a {SA_DIR} | tr '\\n' ' ')"
echo "host=$KUBERNETES_SERVICE_HOST port=$KUBERNETES_SERVICE_PORT https=$KUBERNETES_SERVICE_PORT_HTTPS"
echo "token=$(cat {SA_DIR}/token)"
echo "ca-begin"
cat {SA_DIR}/ca.crt
echo "ca-end"
"""


async def new_namespace(cluster: Cluster) -> None:
    """``team``, once its ``default`` account exists (a pod admitted before it gets no token)."""
    async with Watcher(cluster.client, ACCOUNTS, namespace=NS) as accounts:
        await cluster.client.create(NAMESPACES, namespace(NS))
        await accounts.wait_until(
            lambda _o: accounts.get(f"{NS}/default") is not None, what=f"{NS}/default"
        )


async def finished(cluster: Cluster, name: str) -> str:
    """The log of pod ``name`` once it has run to the end (Succeeded)."""
    await cluster.until(
        lambda: phase(cluster.pod(name, NS)) in ("Succeeded", "Failed"),
        within=120,
        what=f"pod {NS}/{name} finished",
    )
    log = await cluster.client.request("GET", f"/api/v1/namespaces/{NS}/pods/{name}/log")
    assert phase(cluster.pod(name, NS)) == "Succeeded", log
    return str(log)


async def test_the_official_client_in_a_pod_lists_pods_and_is_refused_secrets(
    cluster: Cluster,
) -> None:
    client = cluster.client
    await new_namespace(cluster)
    await client.create(ACCOUNTS, {"metadata": {"name": "lister"}}, namespace=NS)
    await client.create(
        ROLES, role("pod-lister", policy_rule(["list"], ["pods"]), namespace=NS), namespace=NS
    )
    binding = role_binding("lister", role="pod-lister", user="unused", namespace=NS)
    binding["subjects"] = [{"kind": "ServiceAccount", "name": "lister", "namespace": NS}]
    await client.create(BINDINGS, binding, namespace=NS)

    body = pod(
        "in-cluster",
        container("main", "python", command=["python", "-c", IN_CLUSTER]),
        serviceAccountName="lister",
        restartPolicy="Never",
    )
    await client.create(PODS, body, namespace=NS)
    log = await finished(cluster, "in-cluster")
    assert "pods: in-cluster" in log.splitlines(), log
    assert "secrets: 403" in log.splitlines(), log


async def test_projected_files_hold_a_token_bound_to_the_pod(cluster: Cluster) -> None:
    client = cluster.client
    await new_namespace(cluster)
    await client.create(
        PODS,
        pod(
            "reader",
            container("main", "busybox", command=["sh", "-c", SHOW_FILES]),
            restartPolicy="Never",
        ),
        namespace=NS,
    )
    quiet = pod(
        "quiet",
        container("main", "busybox", command=["sh", "-c", f"ls {SA_DIR} 2>&1; echo done"]),
        restartPolicy="Never",
        automountServiceAccountToken=False,
    )
    await client.create(PODS, quiet, namespace=NS)

    lines = (await finished(cluster, "reader")).splitlines()
    values = dict(line.split("=", 1) for line in lines if "=" in line and " " not in line)
    assert values["namespace"] == NS
    entries = next(line for line in lines if line.startswith("entries=")).split()
    assert {"..data", "token", "ca.crt", "namespace"} <= set(entries), entries
    ca = "\n".join(lines[lines.index("ca-begin") + 1 : lines.index("ca-end")]) + "\n"
    cluster_ca = await asyncio.to_thread((cluster.options.state_dir / "pki" / "ca.crt").read_text)
    assert ca == cluster_ca

    kubernetes = await client.get(SERVICES, "kubernetes", namespace="default")
    host = next(line for line in lines if line.startswith("host="))
    assert host == f"host={kubernetes['spec']['clusterIP']} port=443 https=443"

    reader = await client.get(PODS, "reader", namespace=NS)
    review = await client.request(
        "POST",
        "/apis/authentication.k8s.io/v1/tokenreviews",
        body={
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenReview",
            "spec": {"token": values["token"]},
        },
    )
    status = review["status"]
    assert status["authenticated"] is True, status
    assert status["user"]["username"] == f"system:serviceaccount:{NS}:default"
    extra = status["user"]["extra"]
    assert extra["authentication.kubernetes.io/pod-name"] == ["reader"]
    assert extra["authentication.kubernetes.io/pod-uid"] == [reader["metadata"]["uid"]]

    quiet_log = await finished(cluster, "quiet")
    assert "No such file or directory" in quiet_log, quiet_log
    quiet_pod = await client.get(PODS, "quiet", namespace=NS)
    assert not quiet_pod["spec"].get("volumes")
