"""Discovery: how kubectl and client libraries learn what this apiserver serves.

Why: every kubectl command starts by asking ``/api`` and ``/apis`` which resources exist, their
kinds, scope, verbs and short names (``po``, ``rc``...) — short names live nowhere else. The
dispatcher ``kubectl`` on the PATH first asks ``/version`` and picks the kubectl binary whose
minor version matches. ``kubectl apply`` downloads ``/openapi/v3`` to decide how to validate.

What it owns: the routes ``/version``, ``/api``, ``/api/v1``, ``/apis``, ``/apis/{group}``,
``/apis/{group}/{version}``, ``/openapi/v2`` and ``/openapi/v3[/{path}]``, all generated from the
``Registry``. ``/api`` and ``/apis`` answer in the legacy shapes (``APIVersions``,
``APIGroupList``) or, when the Accept header asks for it, as aggregated discovery
(``apidiscovery.k8s.io/v2`` or ``v2beta1`` ``APIGroupDiscoveryList``) with that exact
Content-Type — client-go decides how to parse by the response Content-Type. Aggregated documents
and OpenAPI documents are serialised once and carry an ``ETag``; ``If-None-Match`` gets a 304.

The documents are rebuilt whenever a CRD's kind is served or withdrawn (the ``refresh``
``setup_discovery`` returns), so their ETags and the OpenAPI ``hash`` change with them: that is
how kubectl's discovery cache learns of a new kind (it re-reads on a changed ETag, and on a kind
it does not know).

Limits: no protobuf (a client that only accepts protobuf gets JSON anyway, as kubectl accepts);
``/openapi/v2`` is a 404 Status, which kubectl tolerates (it falls back to its compiled-in types).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import platform
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from api.errors import NotFound, StatusError
from api.registry import Registry, ResourceType, Subresource
from services.apiserver.codec import json_response
from services.apiserver.openapi import OpenAPIV3

__all__ = [
    "AGGREGATED_V2",
    "AGGREGATED_V2BETA1",
    "VERSION_INFO",
    "aggregated_discovery",
    "api_group",
    "api_group_list",
    "api_resource_list",
    "negotiate_discovery",
    "setup_discovery",
]

VERSION_INFO: dict[str, str] = {
    # minor 32 makes the kubectl dispatcher run kubectl 1.32 (exec over WebSocket needs >= 1.30);
    # the "-kubelite" pre-release suffix keeps gitVersion valid semver for kubectl's skew check
    "major": "1",
    "minor": "32",
    "gitVersion": "v1.32.0-kubelite",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2025-01-01T00:00:00Z",
    "goVersion": f"python{platform.python_version()}",
    "compiler": "cpython",
    "platform": f"{platform.system().lower()}/{platform.machine().lower() or 'unknown'}",
}

AGGREGATED_V2 = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
AGGREGATED_V2BETA1 = "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList"
JSON = "application/json"


# --------------------------------------------------------------------------------------------
# documents (pure functions of the registry)


def _subresource_gvk(rt: ResourceType, sub: Subresource) -> tuple[str, str, str]:
    """The subresource's response group/version/kind; ``status`` of ``apps`` kinds stays in ``apps``."""
    if not sub.group and sub.kind == rt.kind:
        return rt.group, rt.version, sub.kind
    return sub.group, sub.version, sub.kind


def _versions_of(registry: Registry, group: str) -> list[str]:
    return registry.groups().get(group, [])


def _types_in(registry: Registry, group: str, version: str) -> list[ResourceType]:
    return [rt for rt in registry.every_version() if rt.group == group and rt.version == version]


def api_resource_list(registry: Registry, group: str, version: str) -> dict[str, Any]:
    """Legacy ``APIResourceList`` of one group-version (``/api/v1``, ``/apis/apps/v1``)."""
    resources: list[dict[str, Any]] = []
    for rt in _types_in(registry, group, version):
        entry: dict[str, Any] = {
            "name": rt.plural,
            "singularName": rt.singular,
            "namespaced": rt.namespaced,
            "kind": rt.kind,
            "verbs": list(rt.verbs),
        }
        if rt.short_names:
            entry["shortNames"] = list(rt.short_names)
        if rt.categories:
            entry["categories"] = list(rt.categories)
        resources.append(entry)
        for sub in rt.subresources:
            sub_group, sub_version, sub_kind = _subresource_gvk(rt, sub)
            sub_entry: dict[str, Any] = {
                "name": f"{rt.plural}/{sub.name}",
                "singularName": "",
                "namespaced": rt.namespaced,
                "kind": sub_kind,
                "verbs": list(sub.verbs),
            }
            if (sub_group, sub_version) != (rt.group, rt.version):
                sub_entry["group"] = sub_group
                sub_entry["version"] = sub_version
            resources.append(sub_entry)
    doc: dict[str, Any] = {"kind": "APIResourceList"}
    if group:
        doc["apiVersion"] = "v1"
    doc["groupVersion"] = f"{group}/{version}" if group else version
    doc["resources"] = resources
    return doc


def api_group(registry: Registry, group: str) -> dict[str, Any]:
    """Legacy ``APIGroup`` (``/apis/{group}``); the first registered version is preferred."""
    versions = [
        {"groupVersion": f"{group}/{v}", "version": v} for v in _versions_of(registry, group)
    ]
    return {
        "kind": "APIGroup",
        "apiVersion": "v1",
        "name": group,
        "versions": versions,
        "preferredVersion": versions[0] if versions else {},
    }


def api_group_list(registry: Registry) -> dict[str, Any]:
    """Legacy ``APIGroupList`` (``/apis``): every named group, the core group excluded."""
    groups = []
    for group in registry.groups():
        if group:
            doc = api_group(registry, group)
            del doc["kind"], doc["apiVersion"]
            groups.append(doc)
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def _aggregated_resource(rt: ResourceType) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "resource": rt.plural,
        "responseKind": {"group": rt.group, "version": rt.version, "kind": rt.kind},
        "scope": "Namespaced" if rt.namespaced else "Cluster",
        "singularResource": rt.singular,
        "verbs": list(rt.verbs),
    }
    if rt.short_names:
        entry["shortNames"] = list(rt.short_names)
    if rt.categories:
        entry["categories"] = list(rt.categories)
    subresources = []
    for sub in rt.subresources:
        sub_group, sub_version, sub_kind = _subresource_gvk(rt, sub)
        subresources.append(
            {
                "subresource": sub.name,
                "responseKind": {"group": sub_group, "version": sub_version, "kind": sub_kind},
                "verbs": list(sub.verbs),
            }
        )
    if subresources:
        entry["subresources"] = subresources
    return entry


def aggregated_discovery(
    registry: Registry, *, legacy: bool, version: str = "v2"
) -> dict[str, Any]:
    """``APIGroupDiscoveryList``: of the core group (``legacy=True``, for ``/api``) or of every
    named group (``legacy=False``, for ``/apis``). ``version`` is ``v2`` or ``v2beta1``."""
    items = []
    for group, versions in registry.groups().items():
        if (group == "") != legacy:
            continue
        metadata: dict[str, Any] = {"name": group} if group else {}
        items.append(
            {
                "metadata": metadata,
                "versions": [
                    {
                        "version": v,
                        "resources": [
                            _aggregated_resource(rt) for rt in _types_in(registry, group, v)
                        ],
                        "freshness": "Current",
                    }
                    for v in versions
                ],
            }
        )
    return {
        "kind": "APIGroupDiscoveryList",
        "apiVersion": f"apidiscovery.k8s.io/{version}",
        "metadata": {},
        "items": items,
    }


def _media_entries(accept: str | None) -> Iterable[tuple[str, dict[str, str]]]:
    for entry in (accept or "").split(","):
        media, *raw_params = (part.strip() for part in entry.split(";"))
        params: dict[str, str] = {}
        for raw in raw_params:
            key, _, value = raw.partition("=")
            params[key.strip().lower()] = value.strip()
        if media:
            yield media.lower(), params


def negotiate_discovery(accept: str | None) -> str | None:
    """``"v2"`` or ``"v2beta1"`` if the Accept header's first satisfiable entry asks for
    aggregated discovery, ``None`` for the legacy documents (plain JSON, ``*/*``, no header)."""
    for media, params in _media_entries(accept):
        if media not in (JSON, "application/*", "*/*"):
            continue  # protobuf and others: not served, try the next entry
        if "as" not in params:
            return None
        if (
            params.get("as") == "APIGroupDiscoveryList"
            and params.get("g") == "apidiscovery.k8s.io"
            and params.get("v") in ("v2", "v2beta1")
        ):
            return params["v"]
    return None


# --------------------------------------------------------------------------------------------
# serving


@dataclass(frozen=True, slots=True)
class _Body:
    """A document serialised once, with its Content-Type and ETag."""

    data: bytes
    content_type: str
    etag: str

    @classmethod
    def of(cls, doc: Any, content_type: str) -> _Body:
        data = json.dumps(doc, separators=(",", ":")).encode()
        return cls(data, content_type, '"' + hashlib.sha256(data).hexdigest().upper() + '"')

    def respond(self, request: web.Request) -> web.Response:
        headers = {"ETag": self.etag, "Vary": "Accept"}
        if self.etag in _if_none_match(request):
            return web.Response(status=304, headers=headers)
        # aiohttp's content_type= refuses parameters; the raw header keeps them verbatim
        return web.Response(body=self.data, headers={**headers, "Content-Type": self.content_type})


def _if_none_match(request: web.Request) -> set[str]:
    raw = request.headers.get("If-None-Match", "")
    return {tag.strip() for tag in raw.split(",") if tag.strip()}


def _status_response(err: StatusError) -> web.Response:
    return json_response(err.to_status(), status=err.code)


class _Discovery:
    """The documents of one registry, built once."""

    def __init__(self, registry: Registry) -> None:
        self.registry = registry
        self._build_documents()
        self.openapi = OpenAPIV3(registry)
        self._openapi_lock = asyncio.Lock()

    def refresh(self) -> None:
        """Rebuild the documents after the registry changed (a CRD's kind came or went)."""
        self._build_documents()
        self.openapi.refresh_custom()

    def _build_documents(self) -> None:
        registry = self.registry
        self.aggregated: dict[tuple[bool, str], _Body] = {
            (legacy, version): _Body.of(
                aggregated_discovery(registry, legacy=legacy, version=version),
                AGGREGATED_V2 if version == "v2" else AGGREGATED_V2BETA1,
            )
            for legacy in (True, False)
            for version in ("v2", "v2beta1")
        }
        self.group_list = _Body.of(api_group_list(registry), JSON)
        self.groups = {
            group: _Body.of(api_group(registry, group), JSON)
            for group in registry.groups()
            if group
        }
        self.resource_lists = {
            (group, version): _Body.of(api_resource_list(registry, group, version), JSON)
            for group, versions in registry.groups().items()
            for version in versions
        }

    async def _openapi_built(self) -> None:
        """Build the OpenAPI documents once, off the event loop (a few hundred ms of pydantic
        schema generation must not stall every watch being served)."""
        if self.openapi.built:
            return
        async with self._openapi_lock:
            if not self.openapi.built:
                await asyncio.to_thread(self.openapi.build)

    async def version(self, request: web.Request) -> web.Response:
        return web.json_response(VERSION_INFO)

    async def api(self, request: web.Request) -> web.Response:
        aggregated = negotiate_discovery(request.headers.get("Accept"))
        if aggregated is not None:
            return self.aggregated[(True, aggregated)].respond(request)
        core_versions = _versions_of(self.registry, "")
        return web.json_response(
            {
                "kind": "APIVersions",
                "versions": core_versions,
                "serverAddressByClientCIDRs": [
                    {"clientCIDR": "0.0.0.0/0", "serverAddress": request.host}
                ],
            }
        )

    async def apis(self, request: web.Request) -> web.Response:
        aggregated = negotiate_discovery(request.headers.get("Accept"))
        if aggregated is not None:
            return self.aggregated[(False, aggregated)].respond(request)
        return self.group_list.respond(request)

    async def core_version(self, request: web.Request) -> web.Response:
        return self._resource_list(request, "", request.match_info["version"])

    async def group(self, request: web.Request) -> web.Response:
        group = request.match_info["group"]
        body = self.groups.get(group)
        if body is None:
            return _status_response(NotFound("the server could not find the requested resource"))
        return body.respond(request)

    async def group_version(self, request: web.Request) -> web.Response:
        return self._resource_list(
            request, request.match_info["group"], request.match_info["version"]
        )

    def _resource_list(self, request: web.Request, group: str, version: str) -> web.Response:
        body = self.resource_lists.get((group, version))
        if body is None:
            return _status_response(NotFound("the server could not find the requested resource"))
        return body.respond(request)

    async def openapi_v2(self, request: web.Request) -> web.Response:
        return _status_response(NotFound("the server could not find the requested resource"))

    async def openapi_v3_root(self, request: web.Request) -> web.Response:
        await self._openapi_built()
        return self._openapi_body(self.openapi.root_body(), request)

    async def openapi_v3_doc(self, request: web.Request) -> web.StreamResponse:
        await self._openapi_built()
        body = self.openapi.document_body(request.match_info["path"])
        if body is None:
            return _status_response(NotFound("the server could not find the requested resource"))
        asked = request.query.get("hash")
        current = body[1].strip('"')
        if asked is not None and asked != current:
            # as the real server: an outdated hash is redirected to the current document
            location = request.rel_url.update_query(hash=current)
            return web.Response(
                status=301, headers={"Location": str(location), "Cache-Control": "no-cache"}
            )
        response = self._openapi_body(body, request)
        if asked is not None:
            # a hash-addressed document never changes: clients may cache it for good
            response.headers["Cache-Control"] = "public, immutable"
        return response

    @staticmethod
    def _openapi_body(body: tuple[bytes, str], request: web.Request) -> web.Response:
        data, etag = body
        headers = {"ETag": etag, "Vary": "Accept"}
        if etag in _if_none_match(request):
            return web.Response(status=304, headers=headers)
        return web.Response(body=data, headers={**headers, "Content-Type": JSON})


def setup_discovery(app: web.Application, registry: Registry) -> Callable[[], None]:
    """Register the discovery, version and OpenAPI routes of ``registry`` on ``app``; returns
    what to call after the registry changes (a CRD's kind served or withdrawn)."""
    d = _Discovery(registry)
    routes = {
        "/version": d.version,
        "/api": d.api,
        "/api/{version}": d.core_version,
        "/apis": d.apis,
        "/apis/{group}": d.group,
        "/apis/{group}/{version}": d.group_version,
    }
    for path, handler in routes.items():
        app.router.add_get(path, handler)
        # the official clients ask with a trailing slash (/version/, /apis/apps/v1/)
        app.router.add_get(path + "/", handler)
    app.router.add_get("/openapi/v2", d.openapi_v2)
    app.router.add_get("/openapi/v3", d.openapi_v3_root)
    app.router.add_get("/openapi/v3/{path:.+}", d.openapi_v3_doc)
    return d.refresh
