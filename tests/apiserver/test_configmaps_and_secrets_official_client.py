"""The official ``kubernetes`` client's typed ConfigMap and Secret calls against a real
apiserver process: create, read, replace, patch, list, watch and delete, ``stringData`` never
coming back, and ``immutable`` refused with a 422 the client surfaces as ``ApiException``."""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any

import pytest
from kubernetes import client, watch

from kubelite.testing import ComponentProcess

NS = "default"


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def until_deleted(list_call: Any, name: str, *, resource_version: str) -> list[dict[str, Any]]:
    """The typed watch events of ``name`` from ``resource_version`` up to its DELETED."""
    w = watch.Watch()
    events = []
    for event in w.stream(list_call, NS, resource_version=resource_version, timeout_seconds=30):
        if event["object"].metadata.name != name:
            continue
        events.append(event)
        if event["type"] == "DELETED":
            w.stop()
    return events


async def test_typed_configmap_and_secret_calls(apiserver_process) -> None:  # type: ignore[no-untyped-def]
    server: ComponentProcess = await asyncio.to_thread(apiserver_process, store="memory://")
    await asyncio.to_thread(_configmaps, server.url)
    await asyncio.to_thread(_secrets, server.url)


def _configmaps(url: str) -> None:
    v1 = client.CoreV1Api(client.ApiClient(client.Configuration(host=url)))
    start_rv = v1.list_namespaced_config_map(NS).metadata.resource_version
    body = client.V1ConfigMap(
        metadata=client.V1ObjectMeta(name="app", labels={"app": "demo"}),
        data={"a": "1"},
        binary_data={"bin": b64("\x00\x01")},
    )
    created = v1.create_namespaced_config_map(NS, body)
    assert created.metadata.uid and created.data == {"a": "1"}
    assert created.binary_data == {"bin": b64("\x00\x01")}

    read = v1.read_namespaced_config_map("app", NS)
    read.data["b"] = "2"
    replaced = v1.replace_namespaced_config_map("app", NS, read)
    assert replaced.data == {"a": "1", "b": "2"}
    patched = v1.patch_namespaced_config_map("app", NS, {"data": {"c": "3"}})
    assert patched.data == {"a": "1", "b": "2", "c": "3"}
    listed = v1.list_namespaced_config_map(NS, label_selector="app=demo")
    assert [cm.metadata.name for cm in listed.items] == ["app"]
    v1.delete_namespaced_config_map("app", NS)

    events = [
        (e["type"], e["object"].metadata.name, sorted(e["object"].data or {}))
        for e in until_deleted(v1.list_namespaced_config_map, "app", resource_version=start_rv)
    ]
    assert events == [
        ("ADDED", "app", ["a"]),
        ("MODIFIED", "app", ["a", "b"]),
        ("MODIFIED", "app", ["a", "b", "c"]),
        ("DELETED", "app", ["a", "b", "c"]),
    ]

    frozen = client.V1ConfigMap(
        metadata=client.V1ObjectMeta(name="frozen"), data={"a": "1"}, immutable=True
    )
    v1.create_namespaced_config_map(NS, frozen)
    with pytest.raises(client.ApiException) as err:
        v1.patch_namespaced_config_map("frozen", NS, {"data": {"a": "2"}})
    assert err.value.status == 422
    status = json.loads(err.value.body)
    assert status["details"]["causes"] == [
        {
            "reason": "FieldValueForbidden",
            "message": "Forbidden: field is immutable when `immutable` is set",
            "field": "data",
        }
    ]


def _secrets(url: str) -> None:
    v1 = client.CoreV1Api(client.ApiClient(client.Configuration(host=url)))
    start_rv = v1.list_namespaced_secret(NS).metadata.resource_version
    body = client.V1Secret(
        metadata=client.V1ObjectMeta(name="creds"), string_data={"password": "s3cret"}
    )
    created = v1.create_namespaced_secret(NS, body)
    assert created.type == "Opaque" and created.string_data is None
    assert created.data == {"password": b64("s3cret")}

    raw = v1.read_namespaced_secret("creds", NS, _preload_content=False)
    assert "stringData" not in json.loads(raw.data)

    read = v1.read_namespaced_secret("creds", NS)
    read.string_data = {"user": "admin"}
    replaced = v1.replace_namespaced_secret("creds", NS, read)
    assert replaced.string_data is None
    assert replaced.data == {"password": b64("s3cret"), "user": b64("admin")}
    patched = v1.patch_namespaced_secret("creds", NS, {"data": {"password": b64("new")}})
    assert patched.data["password"] == b64("new")
    listed = v1.list_namespaced_secret(NS, field_selector="type=Opaque")
    assert "creds" in [s.metadata.name for s in listed.items]
    raw_list = v1.list_namespaced_secret(NS, _preload_content=False)
    assert "stringData" not in raw_list.data.decode()
    v1.delete_namespaced_secret("creds", NS)

    events = [
        (e["type"], sorted(e["object"].data or {}))
        for e in until_deleted(v1.list_namespaced_secret, "creds", resource_version=start_rv)
    ]
    assert events == [
        ("ADDED", ["password"]),
        ("MODIFIED", ["password", "user"]),
        ("MODIFIED", ["password", "user"]),
        ("DELETED", ["password", "user"]),
    ]

    tls = client.V1Secret(
        metadata=client.V1ObjectMeta(name="tls"), type="kubernetes.io/tls", data={}
    )
    with pytest.raises(client.ApiException) as err:
        v1.create_namespaced_secret(NS, tls)
    assert err.value.status == 422
    causes = json.loads(err.value.body)["details"]["causes"]
    assert [c["field"] for c in causes] == ["data[tls.crt]", "data[tls.key]"]
