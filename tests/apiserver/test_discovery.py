"""Discovery, /version and OpenAPI, served by an app holding only the discovery routes."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import urlsplit

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient

from api.registry import REGISTRY, ResourceType
from services.apiserver.discovery import AGGREGATED_V2, AGGREGATED_V2BETA1, setup_discovery

KUBECTL_DISCOVERY_ACCEPT = (
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,"
    "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,"
    "application/json"
)
SHORT_NAMES = {
    "pods": ["po"],
    "nodes": ["no"],
    "replicationcontrollers": ["rc"],
    "events": ["ev"],
    "namespaces": ["ns"],
    "replicasets": ["rs"],
    "deployments": ["deploy"],
}

Client = TestClient[web.Request, web.Application]


@pytest.fixture
async def client(aiohttp_client: Callable[[web.Application], Awaitable[Client]]) -> Client:
    app = web.Application()
    setup_discovery(app, REGISTRY)
    return await aiohttp_client(app)


async def get_json(client: Client, path: str, **headers: str) -> tuple[Any, dict[str, str]]:
    resp = await client.get(path, headers=headers)
    assert resp.status == 200, await resp.text()
    return json.loads(await resp.read()), dict(resp.headers)


def _all_types() -> list[ResourceType]:
    return list(REGISTRY)


# ---- /version


async def test_version_reports_minor_32_and_semver(client: Client) -> None:
    body, headers = await get_json(client, "/version?timeout=5s")
    assert body["major"] == "1"
    assert body["minor"] == "32"
    assert body["gitVersion"].startswith("v1.32.")
    for key in ("gitCommit", "gitTreeState", "buildDate", "goVersion", "compiler", "platform"):
        assert isinstance(body[key], str) and body[key]
    assert headers["Content-Type"].startswith("application/json")


# ---- legacy discovery


async def test_api_legacy_versions(client: Client) -> None:
    body, headers = await get_json(client, "/api", Accept="application/json, */*")
    assert body["kind"] == "APIVersions"
    assert body["versions"] == ["v1"]
    address = body["serverAddressByClientCIDRs"][0]["serverAddress"]
    assert address == f"{client.host}:{client.port}"
    assert headers["Content-Type"].startswith("application/json")
    no_accept, _ = await get_json(client, "/api")
    assert no_accept["kind"] == "APIVersions"


async def test_api_v1_resource_list_with_subresources(client: Client) -> None:
    body, _ = await get_json(client, "/api/v1")
    assert body["kind"] == "APIResourceList"
    assert body["groupVersion"] == "v1"
    by_name = {r["name"]: r for r in body["resources"]}
    for rt in _all_types():
        if rt.group:
            continue
        entry = by_name[rt.plural]
        assert entry["kind"] == rt.kind
        assert entry["singularName"] == rt.singular
        assert entry["namespaced"] is rt.namespaced
        assert entry["verbs"] == list(rt.verbs)
        assert entry.get("shortNames", []) == list(rt.short_names)
    assert by_name["pods"]["categories"] == ["all"]
    assert by_name["pods/status"] == {
        "name": "pods/status",
        "singularName": "",
        "namespaced": True,
        "kind": "Pod",
        "verbs": ["get", "patch", "update"],
    }
    assert by_name["pods/exec"]["kind"] == "PodExecOptions"
    scale = by_name["replicationcontrollers/scale"]
    assert (scale["group"], scale["version"], scale["kind"]) == ("autoscaling", "v1", "Scale")
    assert by_name["nodes/status"]["namespaced"] is False


async def test_apis_legacy_groups_and_group_versions(client: Client) -> None:
    body, _ = await get_json(client, "/apis", Accept="application/json")
    assert body["kind"] == "APIGroupList"
    groups = {g["name"]: g for g in body["groups"]}
    assert set(groups) == {g for g in REGISTRY.groups() if g}
    assert groups["apps"]["preferredVersion"] == {"groupVersion": "apps/v1", "version": "v1"}
    assert groups["apps"]["versions"] == [{"groupVersion": "apps/v1", "version": "v1"}]

    group, _ = await get_json(client, "/apis/apps")
    assert group["kind"] == "APIGroup"
    assert group["name"] == "apps"

    apps, _ = await get_json(client, "/apis/apps/v1")
    assert apps["groupVersion"] == "apps/v1"
    by_name = {r["name"]: r for r in apps["resources"]}
    assert by_name["deployments"]["shortNames"] == ["deploy"]
    assert by_name["deployments/status"]["kind"] == "Deployment"
    assert "group" not in by_name["deployments/status"]
    assert by_name["deployments/scale"]["group"] == "autoscaling"

    leases, _ = await get_json(client, "/apis/coordination.k8s.io/v1")
    assert [r["name"] for r in leases["resources"]] == ["leases"]


@pytest.mark.parametrize(
    "path", ["/apis/nope", "/apis/nope/v1", "/apis/apps/v2", "/api/v2", "/openapi/v2"]
)
async def test_unknown_groups_and_versions_are_404_status(client: Client, path: str) -> None:
    resp = await client.get(path)
    assert resp.status == 404
    body = await resp.json()
    assert body["kind"] == "Status"
    assert body["reason"] == "NotFound"
    assert body["code"] == 404


# ---- aggregated discovery


async def test_api_aggregated_for_kubectl_accept(client: Client) -> None:
    body, headers = await get_json(client, "/api?timeout=32s", Accept=KUBECTL_DISCOVERY_ACCEPT)
    assert headers["Content-Type"] == AGGREGATED_V2
    assert body["kind"] == "APIGroupDiscoveryList"
    assert body["apiVersion"] == "apidiscovery.k8s.io/v2"
    [core] = body["items"]
    assert core["metadata"] == {}
    [v1] = core["versions"]
    assert v1["version"] == "v1"
    assert v1["freshness"] == "Current"
    resources = {r["resource"]: r for r in v1["resources"]}
    assert set(resources) == {rt.plural for rt in _all_types() if not rt.group}
    pods = resources["pods"]
    assert pods["responseKind"] == {"group": "", "version": "v1", "kind": "Pod"}
    assert pods["scope"] == "Namespaced"
    assert pods["singularResource"] == "pod"
    assert pods["categories"] == ["all"]
    subs = {s["subresource"]: s for s in pods["subresources"]}
    assert subs["status"] == {
        "subresource": "status",
        "responseKind": {"group": "", "version": "v1", "kind": "Pod"},
        "verbs": ["get", "patch", "update"],
    }
    assert subs["eviction"]["responseKind"]["group"] == "policy"
    assert resources["nodes"]["scope"] == "Cluster"
    for resource in resources.values():
        assert resource["verbs"], resource
        assert resource["responseKind"]["kind"]


async def test_every_short_name_is_discoverable(client: Client) -> None:
    core, _ = await get_json(client, "/api", Accept=KUBECTL_DISCOVERY_ACCEPT)
    groups, _ = await get_json(client, "/apis", Accept=KUBECTL_DISCOVERY_ACCEPT)
    found: dict[str, list[str]] = {}
    for item in core["items"] + groups["items"]:
        for version in item["versions"]:
            for r in version["resources"]:
                found[r["resource"]] = r.get("shortNames", [])
    for plural, names in SHORT_NAMES.items():
        assert found[plural] == names
    for rt in _all_types():
        assert found[rt.plural] == list(rt.short_names)


async def test_apis_aggregated_groups(client: Client) -> None:
    body, headers = await get_json(client, "/apis", Accept=KUBECTL_DISCOVERY_ACCEPT)
    assert headers["Content-Type"] == AGGREGATED_V2
    names = [item["metadata"]["name"] for item in body["items"]]
    assert names == [g for g in REGISTRY.groups() if g]
    apps = body["items"][names.index("apps")]
    deployments = {r["resource"]: r for r in apps["versions"][0]["resources"]}["deployments"]
    assert deployments["responseKind"] == {"group": "apps", "version": "v1", "kind": "Deployment"}
    subs = {s["subresource"]: s["responseKind"] for s in deployments["subresources"]}
    assert subs["status"] == {"group": "apps", "version": "v1", "kind": "Deployment"}
    assert subs["scale"] == {"group": "autoscaling", "version": "v1", "kind": "Scale"}


async def test_v2beta1_only_clients_get_v2beta1(client: Client) -> None:
    body, headers = await get_json(
        client,
        "/apis",
        Accept="application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList",
    )
    assert headers["Content-Type"] == AGGREGATED_V2BETA1
    assert body["apiVersion"] == "apidiscovery.k8s.io/v2beta1"


async def test_plain_json_first_gets_legacy(client: Client) -> None:
    body, headers = await get_json(
        client, "/api", Accept="application/json," + KUBECTL_DISCOVERY_ACCEPT
    )
    assert body["kind"] == "APIVersions"
    assert headers["Content-Type"].startswith("application/json")
    assert "apidiscovery" not in headers["Content-Type"]


async def test_aggregated_etag_and_not_modified(client: Client) -> None:
    first = await client.get("/api", headers={"Accept": KUBECTL_DISCOVERY_ACCEPT})
    etag = first.headers["ETag"]
    assert etag.startswith('"') and etag.endswith('"')
    again = await client.get(
        "/api", headers={"Accept": KUBECTL_DISCOVERY_ACCEPT, "If-None-Match": etag}
    )
    assert again.status == 304
    assert again.headers["ETag"] == etag
    other = await client.get("/apis", headers={"Accept": KUBECTL_DISCOVERY_ACCEPT})
    assert other.headers["ETag"] != etag
    stale = await client.get(
        "/api", headers={"Accept": KUBECTL_DISCOVERY_ACCEPT, "If-None-Match": '"nope"'}
    )
    assert stale.status == 200


# ---- OpenAPI v3


async def _openapi_docs(client: Client) -> dict[str, dict[str, Any]]:
    root, _ = await get_json(client, "/openapi/v3?timeout=32s", Accept="application/json, */*")
    docs = {}
    for path, entry in root["paths"].items():
        url = urlsplit(entry["serverRelativeURL"])
        assert url.path == f"/openapi/v3/{path}"
        assert url.query.startswith("hash=")
        docs[path], _ = await get_json(
            client, entry["serverRelativeURL"], Accept="application/json"
        )
    return docs


async def test_openapi_root_lists_every_group_version(client: Client) -> None:
    docs = await _openapi_docs(client)
    expected = {
        f"apis/{g}/{v}" if g else f"api/{v}" for g, vs in REGISTRY.groups().items() for v in vs
    }
    assert set(docs) == expected
    for doc in docs.values():
        assert doc["openapi"].startswith("3.")


async def test_every_patchable_kind_declares_field_validation(client: Client) -> None:
    docs = await _openapi_docs(client)
    for rt in _all_types():
        if "patch" not in rt.verbs:
            continue
        doc = docs[f"apis/{rt.group}/{rt.version}" if rt.group else f"api/{rt.version}"]
        gvk = {"group": rt.group, "version": rt.version, "kind": rt.kind}
        patch_ops = [
            item["patch"]
            for item in doc["paths"].values()
            if "patch" in item and item["patch"]["x-kubernetes-group-version-kind"] == gvk
        ]
        assert patch_ops, rt.kind
        for patch in patch_ops:
            names = [p["name"] for p in patch["parameters"]]
            assert "fieldValidation" in names
            # no requestBody: kubectl then builds strategic merge patches from its own types
            assert "requestBody" not in patch
        schemas = doc["components"]["schemas"]
        tagged = [
            n for n, s in schemas.items() if gvk in s.get("x-kubernetes-group-version-kind", [])
        ]
        assert len(tagged) == 1, (rt.kind, tagged)


async def test_openapi_component_names_and_dialect(client: Client) -> None:
    docs = await _openapi_docs(client)
    core = docs["api/v1"]
    schemas = core["components"]["schemas"]
    assert "io.k8s.api.core.v1.Pod" in schemas
    assert "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta" in schemas
    pod_path = core["paths"]["/api/v1/namespaces/{namespace}/pods/{name}"]
    assert pod_path["patch"]["x-kubernetes-action"] == "patch"
    assert "io.k8s.api.apps.v1.Deployment" in docs["apis/apps/v1"]["components"]["schemas"]

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            assert node.get("type") != "null"
            assert "$defs" not in node and "const" not in node
            if "$ref" in node:
                assert set(node) == {"$ref"}, node
                assert node["$ref"].removeprefix("#/components/schemas/") in schemas_of_doc
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    for doc in docs.values():
        schemas_of_doc = doc["components"]["schemas"]
        walk(doc)


async def test_openapi_etag_and_unknown_document(client: Client) -> None:
    root = await client.get("/openapi/v3")
    etag = root.headers["ETag"]
    assert (await client.get("/openapi/v3", headers={"If-None-Match": etag})).status == 304
    doc = await client.get("/openapi/v3/api/v1")
    assert doc.status == 200
    assert (
        await client.get("/openapi/v3/api/v1", headers={"If-None-Match": doc.headers["ETag"]})
    ).status == 304
    missing = await client.get("/openapi/v3/apis/nope/v1")
    assert missing.status == 404
    assert (await missing.json())["reason"] == "NotFound"


async def test_openapi_hash_addressing(client: Client) -> None:
    root, _ = await get_json(client, "/openapi/v3")
    url = root["paths"]["api/v1"]["serverRelativeURL"]
    current = await client.get(url)
    assert current.status == 200
    assert current.headers["Cache-Control"] == "public, immutable"
    outdated = await client.get("/openapi/v3/api/v1?hash=0BSOLETE", allow_redirects=False)
    assert outdated.status == 301
    assert outdated.headers["Location"] == url
    unhashed = await client.get("/openapi/v3/api/v1")
    assert "immutable" not in unhashed.headers.get("Cache-Control", "")


@pytest.mark.parametrize(
    ("path", "kind"),
    [
        ("/version/", None),
        ("/api/", "APIVersions"),
        ("/api/v1/", "APIResourceList"),
        ("/apis/", "APIGroupList"),
        ("/apis/apps/", "APIGroup"),
        ("/apis/apps/v1/", "APIResourceList"),
    ],
)
async def test_trailing_slash_paths_of_the_official_client(
    client: Client, path: str, kind: str | None
) -> None:
    body, _ = await get_json(client, path, Accept="application/json")
    assert body.get("kind") == kind


async def test_official_python_client_discovers_kinds(client: Client) -> None:
    """The official client's DynamicClient resolves kinds, short names and subresources."""
    from kubernetes import client as k8s
    from kubernetes import dynamic

    def discover() -> tuple[str, Any, Any]:
        config = k8s.Configuration()
        config.host = f"http://{client.host}:{client.port}"
        with k8s.ApiClient(config) as api:
            version = k8s.VersionApi(api).get_code().git_version
            resources = dynamic.DynamicClient(api).resources
            pods = resources.get(api_version="v1", kind="Pod")
            deployments = resources.get(api_version="apps/v1", kind="Deployment")
            return version, pods, deployments

    version, pods, deployments = await asyncio.to_thread(discover)
    assert version == "v1.32.0-kubelite"
    assert (pods.short_names, pods.namespaced) == (["po"], True)
    assert deployments.short_names == ["deploy"]
    assert set(deployments.subresources) == {"status", "scale"}


def test_a_model_pydantic_cannot_describe_still_gets_its_operations(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from pydantic import BaseModel, ConfigDict

    from api.registry import Registry
    from services.apiserver.openapi import OpenAPIV3

    class Opaque:
        pass

    class Widget(BaseModel):
        model_config = ConfigDict(arbitrary_types_allowed=True)
        thing: Opaque | None = None

    widgets = ResourceType(
        group="example.io",
        version="v1",
        kind="Widget",
        plural="widgets",
        singular="widget",
        namespaced=True,
        model=Widget,
    )
    pods = REGISTRY.get("", "v1", "pods")
    assert pods is not None
    docs = OpenAPIV3(Registry([pods, widgets]))
    doc = docs.document("apis/example.io/v1")
    assert doc is not None
    patch = doc["paths"]["/apis/example.io/v1/namespaces/{namespace}/widgets/{name}"]["patch"]
    assert patch["x-kubernetes-group-version-kind"]["kind"] == "Widget"
    assert "fieldValidation" in [p["name"] for p in patch["parameters"]]
    assert "no OpenAPI schema for Widget" in caplog.text
    core = docs.document("api/v1")
    assert core is not None and "io.k8s.api.core.v1.Pod" in core["components"]["schemas"]


async def test_concurrent_first_openapi_requests_share_one_build(client: Client) -> None:
    first, second = await asyncio.gather(client.get("/openapi/v3"), client.get("/openapi/v3"))
    assert first.status == second.status == 200
    assert first.headers["ETag"] == second.headers["ETag"]
    assert await first.json() == await second.json()
