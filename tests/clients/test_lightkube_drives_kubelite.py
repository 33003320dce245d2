"""lightkube (httpx, its own models and codecs) drives a real kubelite apiserver: CRUD, a label
selector and a watch of ConfigMaps and Pods, a CRD and its objects through lightkube's generic
resources, server-side apply by two field managers (a 409 conflict, then ``force``), and
PriorityClass, a built-in kind served from its schema, through lightkube's typed model."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator

import pytest
from lightkube import ApiError, AsyncClient, Client, KubeConfig
from lightkube.generic_resource import create_namespaced_resource
from lightkube.models.core_v1 import Container, PodSpec
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.apiextensions_v1 import CustomResourceDefinition
from lightkube.resources.core_v1 import ConfigMap, Pod
from lightkube.resources.scheduling_v1 import PriorityClass
from lightkube.types import PatchType

from kubelite.testing import ComponentProcess
from tests import factories

pytestmark = pytest.mark.e2e

NS = "default"
GROUP = "lightkube.example.com"
Widget = create_namespaced_resource(GROUP, "v1", "Widget", "widgets")


def kubeconfig(server: str) -> KubeConfig:
    """A kubeconfig as kubectl writes one (lightkube's ``from_server`` leaves out the user its
    clients insist on)."""
    return KubeConfig.from_dict(
        {
            "clusters": [{"name": "kubelite", "cluster": {"server": server}}],
            "users": [{"name": "anonymous", "user": {}}],
            "contexts": [
                {
                    "name": "kubelite",
                    "context": {"cluster": "kubelite", "user": "anonymous", "namespace": NS},
                }
            ],
            "current-context": "kubelite",
        }
    )


@pytest.fixture
def client(clients_apiserver: ComponentProcess) -> Iterator[Client]:
    config = kubeconfig(clients_apiserver.url)
    lk = Client(config=config, field_manager="lightkube-test", trust_env=False)
    try:
        yield lk
    finally:
        lk._client._client.close()  # lightkube has no public close; its httpx client holds a pool


def config_map(name: str, **data: str) -> ConfigMap:
    return ConfigMap(metadata=ObjectMeta(name=name, labels={"suite": "lightkube"}), data=data)


def test_config_maps_and_pods_round_trip(client: Client) -> None:
    created = client.create(config_map("lk-a", colour="red"))
    assert created.metadata is not None and created.metadata.resourceVersion
    assert client.get(ConfigMap, "lk-a").data == {"colour": "red"}

    client.create(ConfigMap(metadata=ObjectMeta(name="lk-other", labels={"suite": "else"})))
    names = [cm.metadata.name for cm in client.list(ConfigMap, labels={"suite": "lightkube"})]
    assert names == ["lk-a"]

    patched = client.patch(ConfigMap, "lk-a", {"data": {"size": "L"}})
    assert patched.data == {"colour": "red", "size": "L"}
    merged = client.patch(ConfigMap, "lk-a", {"data": {"colour": None}}, patch_type=PatchType.MERGE)
    assert merged.data == {"size": "L"}
    merged.data = {"size": "XL"}
    assert client.replace(merged).data == {"size": "XL"}
    client.delete(ConfigMap, "lk-a")
    client.delete(ConfigMap, "lk-other")
    with pytest.raises(ApiError) as gone:
        client.get(ConfigMap, "lk-a")
    assert gone.value.status.code == 404 and gone.value.status.reason == "NotFound"

    pod = Pod(
        metadata=ObjectMeta(name="lk-pod", labels={"suite": "lightkube"}),
        spec=PodSpec(containers=[Container(name="main", image="nginx")]),
    )
    created_pod = client.create(pod)
    assert created_pod.spec is not None and created_pod.spec.restartPolicy == "Always"
    assert created_pod.status is not None and created_pod.status.phase == "Pending"
    assert [p.metadata.name for p in client.list(Pod, labels={"suite": "lightkube"})] == ["lk-pod"]
    client.delete(Pod, "lk-pod", grace_period=0)


def test_watch_from_a_resource_version(client: Client) -> None:
    start = client.list(ConfigMap, labels={"suite": "watched"})
    assert list(start) == []
    rv = start.resourceVersion  # the list's, known once it has been read
    client.create(ConfigMap(metadata=ObjectMeta(name="lk-w", labels={"suite": "watched"})))
    client.patch(ConfigMap, "lk-w", {"data": {"k": "v"}})
    client.delete(ConfigMap, "lk-w")
    seen = []
    for event, obj in client.watch(ConfigMap, labels={"suite": "watched"}, resource_version=rv):
        seen.append((event, obj.metadata.name, obj.data))
        if event == "DELETED":
            break
    assert seen == [
        ("ADDED", "lk-w", None),
        ("MODIFIED", "lk-w", {"k": "v"}),
        ("DELETED", "lk-w", {"k": "v"}),
    ]


def test_a_crd_and_its_objects_as_generic_resources(client: Client) -> None:
    definition = CustomResourceDefinition.from_dict(factories.crd(group=GROUP))
    client.create(definition)
    client.wait(CustomResourceDefinition, f"widgets.{GROUP}", for_conditions=["Established"])

    created = client.create(Widget.from_dict(factories.widget("lk-w1", group=GROUP, replicas=2)))
    assert created["spec"] == {"size": "small", "replicas": 2, "color": "blue"}  # defaulted
    client.patch(Widget, "lk-w1", {"spec": {"replicas": 3}}, patch_type=PatchType.MERGE)
    assert client.get(Widget, "lk-w1")["spec"]["replicas"] == 3
    assert [w.metadata.name for w in client.list(Widget)] == ["lk-w1"]
    scale = client.get(Widget.Scale, "lk-w1")
    assert scale.spec is not None and scale.spec.replicas == 3

    with pytest.raises(ApiError) as refused:
        client.create(Widget.from_dict(factories.widget("lk-bad", group=GROUP, size="huge")))
    assert refused.value.status.code == 422
    assert refused.value.status.details is not None
    causes = refused.value.status.details.causes or []
    assert [(c.field, c.message) for c in causes] == [
        ("spec.size", 'Unsupported value: "huge": supported values: "small", "large"')
    ]

    applied = client.apply(
        Widget.from_dict(factories.widget("lk-w2", group=GROUP)), field_manager="operator"
    )
    assert applied["spec"]["size"] == "small"
    client.delete(Widget, "lk-w1")
    client.delete(Widget, "lk-w2")
    client.delete(CustomResourceDefinition, f"widgets.{GROUP}")


def test_server_side_apply_by_two_managers(client: Client) -> None:
    first = client.apply(config_map("lk-ssa", owner="first"), field_manager="first")
    assert first.metadata is not None and first.metadata.managedFields is not None
    assert [m.manager for m in first.metadata.managedFields] == ["first"]
    assert [m.operation for m in first.metadata.managedFields] == ["Apply"]

    with pytest.raises(ApiError) as conflict:
        client.apply(config_map("lk-ssa", owner="second"), field_manager="second")
    assert conflict.value.status.code == 409
    assert conflict.value.status.reason == "Conflict"
    assert conflict.value.status.message == (
        'Apply failed with 1 conflict: conflict with "first": .data.owner'
    )

    forced = client.apply(config_map("lk-ssa", owner="second"), field_manager="second", force=True)
    assert forced.data == {"owner": "second"}
    assert forced.metadata is not None and forced.metadata.managedFields is not None
    assert {m.manager for m in forced.metadata.managedFields} == {"first", "second"}
    client.delete(ConfigMap, "lk-ssa")


def test_priority_class_is_a_typed_kind(client: Client) -> None:
    created = client.create(PriorityClass(metadata=ObjectMeta(name="lk-pc"), value=42))
    assert created.preemptionPolicy == "PreemptLowerPriority"
    assert client.get(PriorityClass, "lk-pc").value == 42
    applied = client.apply(
        PriorityClass(metadata=ObjectMeta(name="lk-pc"), value=42, description="applied"),
        field_manager="lightkube-test",
        force=True,
    )
    assert applied.description == "applied"
    names = {pc.metadata.name for pc in client.list(PriorityClass)}
    assert {"lk-pc", "system-node-critical", "system-cluster-critical"} <= names
    client.delete(PriorityClass, "lk-pc")


@pytest.fixture
async def async_client(clients_apiserver: ComponentProcess) -> AsyncIterator[AsyncClient]:
    lk = AsyncClient(config=kubeconfig(clients_apiserver.url), trust_env=False)
    try:
        yield lk
    finally:
        await lk.close()


async def test_the_async_client_lists_and_watches(async_client: AsyncClient) -> None:
    listed = async_client.list(ConfigMap, labels={"suite": "lk-async"})
    assert [cm async for cm in listed] == []
    await async_client.create(
        ConfigMap(metadata=ObjectMeta(name="lk-async", labels={"suite": "lk-async"}))
    )
    watch = async_client.watch(
        ConfigMap, labels={"suite": "lk-async"}, resource_version=listed.resourceVersion
    )
    async with contextlib.aclosing(watch) as events:  # closes the stream after the break
        async for event, obj in events:
            assert (event, obj.metadata.name) == ("ADDED", "lk-async")
            break
    await async_client.delete(ConfigMap, "lk-async")
