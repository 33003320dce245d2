"""kubernetes_asyncio (aiohttp; the official client's models, generated from the same OpenAPI)
drives a real kubelite apiserver: CRUD, a label selector and a watch of ConfigMaps and Pods, a
CRD and its objects through ApiextensionsV1Api and CustomObjectsApi, server-side apply (a 409
conflict, then ``force``), and PriorityClass through SchedulingV1Api. Every answer is
deserialised into the client's models, which insist on the fields Kubernetes always sends."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from kubernetes_asyncio import client, watch
from kubernetes_asyncio.client.exceptions import ApiException

from kubelite.testing import ComponentProcess
from tests import factories

pytestmark = pytest.mark.e2e

NS = "default"
GROUP = "asyncio.example.com"
APPLY = "application/apply-patch+yaml"
MERGE = "application/merge-patch+json"
"""CustomObjectsApi's patches say their type: left to choose, the client sends a dict as a JSON
patch, which Kubernetes refuses (400) as kubelite does."""


@pytest.fixture
async def api(clients_apiserver: ComponentProcess) -> AsyncIterator[client.ApiClient]:
    configuration = client.Configuration(host=clients_apiserver.url)
    async with client.ApiClient(configuration) as api_client:
        yield api_client


def config_map(name: str, suite: str, **data: str) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "labels": {"suite": suite}},
    }
    return {**body, "data": data} if data else body


async def test_config_maps_and_pods_round_trip(api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    created = await core.create_namespaced_config_map(NS, config_map("ka-a", "asyncio", k="v"))
    assert isinstance(created, client.V1ConfigMap) and created.metadata.uid
    await core.create_namespaced_config_map(NS, config_map("ka-other", "else"))
    listed = await core.list_namespaced_config_map(NS, label_selector="suite=asyncio")
    assert [cm.metadata.name for cm in listed.items] == ["ka-a"]
    assert listed.metadata.resource_version

    patched = await core.patch_namespaced_config_map("ka-a", NS, {"data": {"k2": "v2"}})
    assert patched.data == {"k": "v", "k2": "v2"}
    patched.data = {"only": "this"}
    replaced = await core.replace_namespaced_config_map("ka-a", NS, patched)
    assert replaced.data == {"only": "this"}
    status = await core.delete_namespaced_config_map("ka-a", NS)
    assert isinstance(status, client.V1Status) and status.status == "Success"
    await core.delete_namespaced_config_map("ka-other", NS)
    with pytest.raises(ApiException) as gone:
        await core.read_namespaced_config_map("ka-a", NS)
    assert gone.value.status == 404

    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "ka-pod", "labels": {"suite": "asyncio"}},
        "spec": {"containers": [{"name": "main", "image": "nginx"}]},
    }
    created_pod = await core.create_namespaced_pod(NS, pod)
    assert created_pod.spec.restart_policy == "Always" and created_pod.status.phase == "Pending"
    pods = await core.list_namespaced_pod(NS, label_selector="suite=asyncio")
    assert [p.metadata.name for p in pods.items] == ["ka-pod"]
    deleted = await core.delete_namespaced_pod("ka-pod", NS, grace_period_seconds=0)
    assert isinstance(deleted, client.V1Pod)


async def test_watch_from_a_resource_version(api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    start = await core.list_namespaced_config_map(NS, label_selector="suite=ka-watched")
    await core.create_namespaced_config_map(NS, config_map("ka-w", "ka-watched"))
    await core.patch_namespaced_config_map("ka-w", NS, {"data": {"k": "v"}})
    await core.delete_namespaced_config_map("ka-w", NS)
    seen = []
    async with watch.Watch() as stream:
        async for event in stream.stream(
            core.list_namespaced_config_map,
            NS,
            label_selector="suite=ka-watched",
            resource_version=start.metadata.resource_version,
        ):
            obj = event["object"]
            assert isinstance(obj, client.V1ConfigMap)
            seen.append((event["type"], obj.metadata.name, obj.data))
            if event["type"] == "DELETED":
                stream.stop()
    assert seen == [
        ("ADDED", "ka-w", None),
        ("MODIFIED", "ka-w", {"k": "v"}),
        ("DELETED", "ka-w", {"k": "v"}),
    ]


async def test_a_crd_and_its_custom_objects(api: client.ApiClient) -> None:
    extensions = client.ApiextensionsV1Api(api)
    name = f"widgets.{GROUP}"
    rv = (await extensions.list_custom_resource_definition()).metadata.resource_version
    await extensions.create_custom_resource_definition(factories.crd(group=GROUP))
    async with watch.Watch() as stream:
        async for event in stream.stream(
            extensions.list_custom_resource_definition,
            field_selector=f"metadata.name={name}",
            resource_version=rv,
        ):
            conditions = event["object"].status.conditions or []
            if any(c.type == "Established" and c.status == "True" for c in conditions):
                stream.stop()

    objects = client.CustomObjectsApi(api)
    args = (GROUP, "v1", NS, "widgets")
    created = await objects.create_namespaced_custom_object(
        *args, factories.widget("ka-w1", group=GROUP, replicas=2)
    )
    assert created["spec"] == {"size": "small", "replicas": 2, "color": "blue"}  # defaulted
    patched = await objects.patch_namespaced_custom_object(
        *args, "ka-w1", {"spec": {"replicas": 3}}, _content_type=MERGE
    )
    assert patched["spec"]["replicas"] == 3
    listed = await objects.list_namespaced_custom_object(*args)
    assert [w["metadata"]["name"] for w in listed["items"]] == ["ka-w1"]
    status = await objects.patch_namespaced_custom_object_status(
        *args, "ka-w1", {"status": {"replicas": 3}}, _content_type=MERGE
    )
    assert status["status"] == {"replicas": 3}
    scale = await objects.get_namespaced_custom_object_scale(*args, "ka-w1")
    assert scale["spec"] == {"replicas": 3}

    with pytest.raises(ApiException) as refused:
        await objects.create_namespaced_custom_object(
            *args, factories.widget("ka-bad", group=GROUP, size="huge")
        )
    assert refused.value.status == 422

    await objects.delete_namespaced_custom_object(*args, "ka-w1")
    # the CRD is answered as it is while its cleanup finalizer runs (the client's model for a
    # delete answer is V1Status, whichever the body)
    answer = await extensions.delete_custom_resource_definition(name)
    assert answer.kind == "CustomResourceDefinition"


async def test_server_side_apply_by_two_managers(api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    body = config_map("ka-ssa", "asyncio-ssa", owner="first")
    first = await core.patch_namespaced_config_map(
        "ka-ssa", NS, body, field_manager="first", _content_type=APPLY
    )
    assert [(m.manager, m.operation) for m in first.metadata.managed_fields] == [("first", "Apply")]
    second = config_map("ka-ssa", "asyncio-ssa", owner="second")
    with pytest.raises(ApiException) as conflict:
        await core.patch_namespaced_config_map(
            "ka-ssa", NS, second, field_manager="second", _content_type=APPLY
        )
    assert conflict.value.status == 409
    # kubernetes_asyncio sends force=True (Python's spelling): Kubernetes reads any value but
    # 0/false as true
    forced = await core.patch_namespaced_config_map(
        "ka-ssa", NS, second, field_manager="second", force=True, _content_type=APPLY
    )
    assert forced.data == {"owner": "second"}
    await core.delete_namespaced_config_map("ka-ssa", NS)


async def test_priority_class_through_scheduling_v1(api: client.ApiClient) -> None:
    scheduling = client.SchedulingV1Api(api)
    created = await scheduling.create_priority_class(factories.priority_class("ka-pc", 7))
    assert isinstance(created, client.V1PriorityClass)
    assert created.preemption_policy == "PreemptLowerPriority" and created.value == 7
    system = await scheduling.read_priority_class("system-cluster-critical")
    assert system.value == 2_000_000_000
    with pytest.raises(ApiException) as immutable:
        await scheduling.patch_priority_class("ka-pc", {"value": 8})
    assert immutable.value.status == 422
    await scheduling.delete_priority_class("ka-pc")


async def test_a_dict_sent_as_a_json_patch_is_refused_in_gos_words(api: client.ApiClient) -> None:
    """What CustomObjectsApi sends for a dict patch unless told ``_content_type``: Kubernetes'
    400 says what Go's decoder says."""
    core = client.CoreV1Api(api)
    await core.create_namespaced_config_map(NS, config_map("ka-jp", "asyncio-jp"))
    with pytest.raises(ApiException) as refused:
        await core.patch_namespaced_config_map(
            "ka-jp", NS, {"data": {"k": "v"}}, _content_type="application/json-patch+json"
        )
    assert refused.value.status == 400
    assert json.loads(refused.value.body)["message"] == (
        "json: cannot unmarshal object into Go value of type jsonpatch.Patch"
    )
    await core.delete_namespaced_config_map("ka-jp", NS)
