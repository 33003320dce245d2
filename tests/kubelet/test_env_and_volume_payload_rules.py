"""Kubernetes' rules for env references, downward API values, volume payloads and resolv.conf,
as pure functions of the pod and the objects it references."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from services.kubelet.atomic_writer import FileProjection
from services.kubelet.container_env import ContainerConfigError, container_env, env_references
from services.kubelet.downward_api import field_value, resource_value
from services.kubelet.object_cache import ObjectRef
from services.kubelet.pod_dns import resolv_conf
from services.kubelet.volume_sources import VolumeError, payload
from tests import factories

NODE = {"cpu": "4", "memory": "8Gi"}
CM = ObjectRef("configmaps", "default", "cm")
SECRET = ObjectRef("secrets", "default", "s")
OBJECTS: dict[ObjectRef, dict[str, Any] | None] = {
    CM: {"data": {"a": "1", "b": "2"}, "binaryData": {"bin": base64.b64encode(b"\x00").decode()}},
    SECRET: {"data": {"pw": base64.b64encode(b"hunter2").decode()}},
}


def _env(container: dict[str, Any], objects: Any = OBJECTS) -> dict[str, str]:
    pod = factories.pod("p", container, namespace="default")
    return container_env(
        pod, container, objects=objects, pod_ip="127.0.0.9", host_ip="127.0.0.1", allocatable=NODE
    ).values


def test_env_from_comes_first_and_env_wins() -> None:
    c = factories.container(
        envFrom=[{"configMapRef": {"name": "cm"}, "prefix": "P_"}, {"secretRef": {"name": "s"}}],
        env=[{"name": "P_a", "value": "mine"}],
    )
    assert _env(c) == {"P_a": "mine", "P_b": "2", "pw": "hunter2"}
    pod = factories.pod("p", c, namespace="default")
    assert env_references(pod, c) == {CM, SECRET}


@pytest.mark.parametrize(
    ("ref", "message"),
    [
        ({"configMapKeyRef": {"name": "gone", "key": "a"}}, 'configmap "gone" not found'),
        ({"configMapKeyRef": {"name": "cm", "key": "z"}}, "couldn't find key z in ConfigMap default/cm"),
        ({"secretKeyRef": {"name": "gone", "key": "a"}}, 'secret "gone" not found'),
        ({"secretKeyRef": {"name": "s", "key": "z"}}, "couldn't find key z in Secret default/s"),
    ],
)  # fmt: skip
def test_missing_references_fail_with_kubernetes_messages(
    ref: dict[str, Any], message: str
) -> None:
    with pytest.raises(ContainerConfigError) as err:
        _env(factories.container(env=[{"name": "V", "valueFrom": ref}]))
    assert err.value.message == message
    ref_kind = next(iter(ref))
    optional = {ref_kind: ref[ref_kind] | {"optional": True}}
    assert _env(factories.container(env=[{"name": "V", "valueFrom": optional}])) == {}


@pytest.mark.parametrize(
    ("resource", "divisor", "limits", "expected"),
    [
        ("limits.cpu", None, {"cpu": "250m"}, "1"),  # rounded up to whole cores
        ("limits.cpu", "1m", {"cpu": "250m"}, "250"),
        ("limits.memory", "1Mi", {"memory": "100M"}, "96"),  # 95.37 Mi rounded up
        ("limits.memory", None, {}, str(8 * 1024**3)),  # no limit: the node's allocatable
        ("requests.cpu", "1m", {"cpu": "2"}, "2000"),  # a missing request defaults to the limit
        ("requests.memory", None, {}, "0"),
    ],
)
def test_resource_field_ref_rounds_up_and_defaults(
    resource: str, divisor: str | None, limits: dict[str, str], expected: str
) -> None:
    container = factories.container(resources={"limits": limits} if limits else {})
    pod = factories.pod("p", container, namespace="default")
    ref = {"resource": resource} | ({"divisor": divisor} if divisor else {})
    assert resource_value(pod, ref, container="main", allocatable=NODE) == expected


def test_label_maps_are_sorted_quoted_lines() -> None:
    pod = factories.pod("p", namespace="default", labels={"z": "1", "a": 'say "hi"'})
    assert field_value(pod, "metadata.labels", env=False) == 'a="say \\"hi\\""\nz="1"'
    assert field_value(pod, "metadata.labels['z']", env=True) == "1"


def _volume_payload(volume: dict[str, Any]) -> dict[str, FileProjection]:
    pod = factories.pod("p", namespace="default", uid="u1")
    return payload(pod, volume, objects=OBJECTS, allocatable=NODE)


def test_configmap_items_modes_and_binary_data() -> None:
    files = _volume_payload(
        {
            "name": "v",
            "configMap": {
                "name": "cm",
                "defaultMode": 0o600,
                "items": [
                    {"key": "a", "path": "x/a"},
                    {"key": "bin", "path": "bin", "mode": 0o400},
                ],
            },
        }
    )
    assert files == {"x/a": FileProjection(b"1", 0o600), "bin": FileProjection(b"\x00", 0o400)}
    every = _volume_payload({"name": "v", "secret": {"secretName": "s"}})
    assert every == {"pw": FileProjection(b"hunter2", 0o644)}


@pytest.mark.parametrize(
    ("volume", "message"),
    [
        ({"configMap": {"name": "gone"}}, 'configmap "gone" not found'),
        ({"secret": {"secretName": "gone"}}, 'secret "gone" not found'),
        ({"configMap": {"name": "cm", "items": [{"key": "z", "path": "z"}]}},
         "configmap references non-existent config key: z"),
        ({"secret": {"secretName": "s", "items": [{"key": "z", "path": "z"}]}},
         "references non-existent secret key: z"),
        ({"projected": {"sources": [{"configMap": {"name": "x"}}, {"secret": {"name": "y"}}]}},
         '[configmap "x" not found, secret "y" not found]'),
    ],
)  # fmt: skip
def test_volume_sources_fail_with_kubernetes_messages(volume: dict[str, Any], message: str) -> None:
    with pytest.raises(VolumeError) as err:
        _volume_payload({"name": "v", **volume})
    assert str(err.value) == message


def test_optional_sources_are_empty_or_skip_missing_keys() -> None:
    assert _volume_payload({"name": "v", "configMap": {"name": "gone", "optional": True}}) == {}
    items = [{"key": "a", "path": "a"}, {"key": "z", "path": "z"}]
    files = _volume_payload(
        {"name": "v", "configMap": {"name": "cm", "items": items, "optional": True}}
    )
    assert set(files) == {"a"}


def test_dns_policy_none_and_dns_config_make_the_resolv_conf() -> None:
    node = "nameserver 10.0.0.2\nsearch corp.example\noptions ndots:1 edns0\n"
    config = {
        "nameservers": ["1.1.1.1"],
        "searches": ["my.example"],
        "options": [{"name": "ndots", "value": "5"}, {"name": "rotate"}],
    }
    assert resolv_conf({"dnsPolicy": "None", "dnsConfig": config}, node_resolv_conf=node) == (
        "nameserver 1.1.1.1\nsearch my.example\noptions ndots:5 rotate\n"
    )
    assert resolv_conf({"dnsConfig": config}, node_resolv_conf=node) == (
        "nameserver 10.0.0.2\nnameserver 1.1.1.1\nsearch corp.example my.example\n"
        "options ndots:5 edns0 rotate\n"
    )
    assert resolv_conf({"dnsPolicy": "ClusterFirst"}, node_resolv_conf=node) is None
