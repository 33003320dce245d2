"""status, binding and scale subresources write only what they own; concurrent binds: one wins."""

from __future__ import annotations

import asyncio

from tests.apiserver.conftest import Api

PODS = "/api/v1/namespaces/default/pods"
RCS = "/api/v1/namespaces/default/replicationcontrollers"
DEPLOYS = "/apis/apps/v1/namespaces/default/deployments"


def binding(pod: str, node: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": pod},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    }


async def test_status_put_changes_only_status(api: Api) -> None:
    created = await api.create_pod("p")
    body = dict(created)
    body["status"] = {"phase": "Running", "podIP": "127.1.0.5"}
    body["spec"] = {**created["spec"], "nodeName": "sneaky"}
    body["metadata"] = {**created["metadata"], "labels": {"sneaky": "yes"}}
    out = await api.ok("PUT", f"{PODS}/p/status", body)
    assert out["status"]["phase"] == "Running" and out["status"]["podIP"] == "127.1.0.5"
    assert "nodeName" not in out["spec"]
    assert "labels" not in out["metadata"]
    got = await api.ok("GET", f"{PODS}/p/status")
    assert got["status"]["phase"] == "Running"


async def test_status_patch_and_main_resource_ignoring_status(api: Api) -> None:
    await api.create_pod("p")
    out = await api.ok(
        "PATCH",
        f"{PODS}/p/status",
        None,
        raw=b'{"status":{"phase":"Running"}}',
        content_type="application/merge-patch+json",
    )
    assert out["status"]["phase"] == "Running"
    status, out = await api.patch(f"{PODS}/p", {"status": {"phase": "Failed"}})
    assert status == 200
    assert out["status"]["phase"] == "Running"


async def test_binding_sets_node_name_once(api: Api) -> None:
    await api.create_pod("p")
    status, out = await api.post(f"{PODS}/p/binding", binding("p", "node1"))
    assert status == 201, out
    assert out["status"] == "Success"
    pod = await api.ok("GET", f"{PODS}/p")
    assert pod["spec"]["nodeName"] == "node1"
    [scheduled] = [c for c in pod["status"]["conditions"] if c["type"] == "PodScheduled"]
    assert scheduled["status"] == "True"
    status, out = await api.post(f"{PODS}/p/binding", binding("p", "node2"))
    assert status == 409
    assert out["reason"] == "Conflict"
    assert 'pod p is already assigned to node "node1"' in out["message"]


async def test_bindings_collection_binds_too(api: Api) -> None:
    await api.create_pod("p")
    status, out = await api.post("/api/v1/namespaces/default/bindings", binding("p", "node1"))
    assert status == 201, out
    assert (await api.ok("GET", f"{PODS}/p"))["spec"]["nodeName"] == "node1"


async def test_concurrent_binds_of_one_pod_exactly_one_wins(api: Api) -> None:
    await api.create_pod("p")
    nodes = [f"node{i}" for i in range(10)]
    results = await asyncio.gather(*(api.post(f"{PODS}/p/binding", binding("p", n)) for n in nodes))
    codes = sorted(status for status, _ in results)
    assert codes == [201] + [409] * 9
    winner = nodes[[status for status, _ in results].index(201)]
    assert (await api.ok("GET", f"{PODS}/p"))["spec"]["nodeName"] == winner


async def test_binding_without_target_is_invalid(api: Api) -> None:
    await api.create_pod("p")
    status, out = await api.post(f"{PODS}/p/binding", {"metadata": {"name": "p"}, "target": {}})
    assert status == 422
    assert out["details"]["causes"][0]["field"] == "target.name"


async def test_scale_reads_and_writes_replicas(api: Api) -> None:
    rc = {
        "apiVersion": "v1",
        "kind": "ReplicationController",
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 1,
            "selector": {"app": "web"},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "c", "image": "nginx"}]},
            },
        },
    }
    await api.ok("POST", RCS, rc)
    scale = await api.ok("GET", f"{RCS}/web/scale")
    assert scale["kind"] == "Scale" and scale["apiVersion"] == "autoscaling/v1"
    assert scale["spec"] == {"replicas": 1}
    assert scale["status"] == {"replicas": 0, "selector": "app=web"}
    out = await api.ok(
        "PATCH",
        f"{RCS}/web/scale",
        None,
        raw=b'{"spec":{"replicas":3}}',
        content_type="application/merge-patch+json",
    )
    assert out["spec"]["replicas"] == 3
    assert (await api.ok("GET", f"{RCS}/web"))["spec"]["replicas"] == 3
    scale = await api.ok("GET", f"{RCS}/web/scale")
    scale["spec"]["replicas"] = 5
    out = await api.ok("PUT", f"{RCS}/web/scale", scale)
    assert out["spec"]["replicas"] == 5
    scale["spec"]["replicas"] = 6  # stale resourceVersion now
    status, out = await api.put(f"{RCS}/web/scale", scale)
    assert status == 409
    status, out = await api.patch(f"{RCS}/web/scale", {"spec": {"replicas": -1}})
    assert status == 422


async def test_deployment_scale_selector_string(api: Api) -> None:
    deploy = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "d"},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "d"}},
            "template": {
                "metadata": {"labels": {"app": "d"}},
                "spec": {"containers": [{"name": "c", "image": "nginx"}]},
            },
        },
    }
    await api.ok("POST", DEPLOYS, deploy)
    scale = await api.ok("GET", f"{DEPLOYS}/d/scale")
    assert scale["status"]["selector"] == "app=d"
    assert scale["spec"]["replicas"] == 2


async def test_unknown_subresource_is_404(api: Api) -> None:
    await api.create_pod("p")
    status, out = await api.get(f"{PODS}/p/nope")
    assert status == 404 and out["kind"] == "Status"


async def test_eviction_deletes_the_pod_with_its_options(api: Api) -> None:
    await api.create_pod("p", nodeName="node1")
    eviction = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": "p", "namespace": "default"},
        "deleteOptions": {"gracePeriodSeconds": 7},
    }
    status, out = await api.post(f"{PODS}/p/eviction", eviction)
    assert status == 201, out
    pod = await api.ok("GET", f"{PODS}/p")
    assert pod["metadata"]["deletionGracePeriodSeconds"] == 7
    status, out = await api.post(
        f"{PODS}/ghost/eviction", dict(eviction, metadata={"name": "ghost"})
    )
    assert status == 404
