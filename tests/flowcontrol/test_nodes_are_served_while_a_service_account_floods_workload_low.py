"""A service account's bulk creates fill ``workload-low``; the node's Lease and status writes
are served all the while, and the requests over the level's queues get Kubernetes' 429.

The apiserver's concurrency is 2 seats (``--max-requests-inflight=1``,
``--max-mutating-requests-inflight=1``), so ``workload-low`` has one
(``ceil(2 * 100 / 245)``); the admin narrows its queuing to one queue of two. The service
account's ConfigMap creates are held in the store (``HeldCreates``): the first takes the seat,
the next two wait in the queue, the fourth is refused at once — ``429``, ``Retry-After: 1``, a
``TooManyRequests`` Status, and the flow headers naming ``service-accounts`` and
``workload-low``. Meanwhile ``system:node:node1`` renews its Lease and patches its Node's
status: ``node-high``, answered 200 while the flood waits. Released, the held creates finish.
"""

from __future__ import annotations

import asyncio
from typing import Any

from kubelite.testing.waiting import apoll_until
from services.apiserver.flowcontrol import FLOW_SCHEMA_UID_HEADER, PRIORITY_LEVEL_UID_HEADER
from store import open_store
from tests.factories import node, policy_rule, role, role_binding
from tests.flowcontrol.conftest import Cluster, HeldCreates

Obj = dict[str, Any]
LEVELS = "/apis/flowcontrol.apiserver.k8s.io/v1/prioritylevelconfigurations"
SCHEMAS = "/apis/flowcontrol.apiserver.k8s.io/v1/flowschemas"
CONFIGMAPS = "/api/v1/namespaces/default/configmaps"
LEASE = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/node1"


def _configmap(name: str) -> Obj:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {}}


def _sample(cluster: Cluster, name: str, **labels: str) -> float:
    value = cluster.control.metrics.registry.get_sample_value(name, labels)
    return value or 0.0


async def _set_up(cluster: Cluster) -> None:
    """The node and its Lease, the account's right to create ConfigMaps, and ``workload-low``
    narrowed to one queue of two requests (its annotation keeps the restart from undoing it)."""
    await cluster.admin("POST", "/api/v1/nodes", node("node1"))
    lease = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "node1", "namespace": "kube-node-lease"},
        "spec": {"holderIdentity": "node1", "leaseDurationSeconds": 40},
    }
    await cluster.admin("POST", LEASE.rsplit("/", 1)[0], lease)
    rbac = "/apis/rbac.authorization.k8s.io/v1/namespaces/default"
    writer = role("configmap-writer", policy_rule(["create"], ["configmaps"]))
    binding = role_binding(
        "bulk", role="configmap-writer", user="system:serviceaccount:default:bulk"
    )
    for path, obj in ((f"{rbac}/roles", writer), (f"{rbac}/rolebindings", binding)):
        written = await cluster.admin("POST", path, obj)
        await cluster.cache_holds(written)
    queuing = {"queues": 1, "handSize": 1, "queueLengthLimit": 2}
    narrowed = await cluster.admin(
        "PATCH",
        f"{LEVELS}/workload-low",
        {
            "metadata": {"annotations": {"apf.kubernetes.io/autoupdate-spec": "false"}},
            "spec": {"limited": {"limitResponse": {"queuing": queuing}}},
        },
    )
    await cluster.cache_holds(narrowed)
    cluster.control.refresh()
    queues = cluster.control.levels["workload-low"].queues
    assert queues is not None and queues.queuing is not None
    assert queues.queuing.queue_length_limit == 2


async def test_node_heartbeats_pass_a_service_account_flood(start_cluster: Any) -> None:
    store = HeldCreates(open_store("memory://"), prefix="/registry/core/configmaps/")
    cluster: Cluster = await start_cluster(
        store, max_requests_inflight=1, max_mutating_requests_inflight=1
    )
    await _set_up(cluster)
    assert cluster.control.levels["workload-low"].queues.seats == 1  # type: ignore[union-attr]

    store.armed = True
    flood = [
        asyncio.ensure_future(cluster.call("POST", CONFIGMAPS, _configmap(f"cm{i}"), token="bulk"))
        for i in range(3)
    ]
    await store.held(1)  # one create holds the seat
    labels = {"priority_level": "workload-low", "flow_schema": "service-accounts"}

    async def two_queued() -> bool:
        return _sample(cluster, "apiserver_flowcontrol_current_inqueue_requests", **labels) == 2

    await apoll_until(two_queued, what="two creates queued behind the one holding the seat")
    mutating = {"request_kind": "mutating"}
    assert _sample(cluster, "apiserver_current_inflight_requests", **mutating) == 1

    refused = await cluster.call("POST", CONFIGMAPS, _configmap("cm-over"), token="bulk")
    assert refused.code == 429, refused
    assert refused.headers["Retry-After"] == "1"
    assert refused.body == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "Too many requests, please try again later.",
        "reason": "TooManyRequests",
        "details": {"retryAfterSeconds": 1},
        "code": 429,
    }
    level = await cluster.admin("GET", f"{LEVELS}/workload-low")
    schema = await cluster.admin("GET", f"{SCHEMAS}/service-accounts")
    assert refused.headers[PRIORITY_LEVEL_UID_HEADER] == level["metadata"]["uid"]
    assert refused.headers[FLOW_SCHEMA_UID_HEADER] == schema["metadata"]["uid"]
    assert (
        _sample(
            cluster, "apiserver_flowcontrol_rejected_requests_total", reason="queue-full", **labels
        )
        == 1
    )

    # the kubelet's writes, while the flood holds workload-low's seat and queue
    lease = (await cluster.call("GET", LEASE, token="node1")).body
    lease["spec"]["renewTime"] = "2026-12-01T10:00:00.000000Z"
    renewed = await cluster.call("PUT", LEASE, lease, token="node1")
    assert renewed.code == 200, renewed
    status = {
        "status": {"conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]}
    }
    reported = await cluster.call("PATCH", "/api/v1/nodes/node1/status", status, token="node1")
    assert reported.code == 200, reported
    node_high = await cluster.admin("GET", f"{LEVELS}/node-high")
    assert renewed.headers[PRIORITY_LEVEL_UID_HEADER] == node_high["metadata"]["uid"]
    assert reported.headers[PRIORITY_LEVEL_UID_HEADER] == node_high["metadata"]["uid"]
    assert not any(f.done() for f in flood)  # the flood was still waiting

    store.release.set()
    created = await asyncio.gather(*flood)
    assert [a.code for a in created] == [201, 201, 201]
    dispatched = "apiserver_flowcontrol_dispatched_requests_total"
    assert _sample(cluster, dispatched, **labels) == 3
    assert (
        _sample(cluster, dispatched, priority_level="node-high", flow_schema="system-node-high")
        == 3
    )


async def test_the_admin_is_exempt_and_a_person_falls_in_global_default(
    start_cluster: Any,
) -> None:
    cluster: Cluster = await start_cluster()
    uid = {}
    for kind, name in ((LEVELS, "exempt"), (LEVELS, "global-default"), (SCHEMAS, "probes")):
        uid[name] = (await cluster.admin("GET", f"{kind}/{name}"))["metadata"]["uid"]
    admin = await cluster.call("GET", "/api/v1/namespaces")
    assert admin.headers[PRIORITY_LEVEL_UID_HEADER] == uid["exempt"]
    probe = await cluster.call("GET", "/healthz", token="alice")
    assert probe.headers[FLOW_SCHEMA_UID_HEADER] == uid["probes"]
    assert probe.headers[PRIORITY_LEVEL_UID_HEADER] == uid["exempt"]
    person = await cluster.call("GET", "/apis", token="alice")
    assert person.code == 200
    assert person.headers[PRIORITY_LEVEL_UID_HEADER] == uid["global-default"]
