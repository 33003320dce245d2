"""OpenAPI v3 documents, one per group-version, generated from the registry and the models.

Why: ``kubectl apply``/``create`` validate by default (``--validate=strict``). kubectl downloads
``/openapi/v3``, follows ``paths["api/v1"].serverRelativeURL``, and looks for a PATCH operation
tagged with the object's ``x-kubernetes-group-version-kind`` that declares a ``fieldValidation``
query parameter. Found, it leaves validation to the server and sends ``fieldValidation=Strict``;
not found, it tries OpenAPI v2 (protobuf, which kubelite does not serve) and ``apply`` fails.
``kubectl explain`` reads the same documents' ``components.schemas``.

What it owns: the root index (``{"paths": {"api/v1": {"serverRelativeURL":
"/openapi/v3/api/v1?hash=..."}}}``) and each group-version's document: list/create, get/replace/
patch/delete operations per resource (and ``/status`` where the kind has it), every operation
carrying ``x-kubernetes-action`` and ``x-kubernetes-group-version-kind``, and component schemas
from ``model_json_schema(by_alias=True)`` renamed to Kubernetes' component names
(``io.k8s.api.core.v1.Pod``, ``io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta``) and rewritten
into the OpenAPI 3.0 dialect kube-openapi decodes (no ``type: null``, no ``$ref`` siblings,
boolean ``exclusiveMinimum``).

A deliberate choice: PATCH operations declare **no requestBody**. kubectl builds a strategic
merge patch from OpenAPI v3 only when the PATCH body lists
``application/strategic-merge-patch+json``, and then needs every schema to carry
``x-kubernetes-patch-merge-key``/``-strategy`` or it warns "error calculating patch from openapi
v3 spec". Without a requestBody kubectl uses its compiled-in Go types for built-in kinds — the
exact merge keys of real Kubernetes — silently.

A CRD's served versions get their documents from the CRD's schema (``apiVersion``, ``kind`` and
``ObjectMeta`` added, as Kubernetes' builder does), remade whenever the custom kinds change
(``refresh_custom``), so ``kubectl explain`` describes a custom kind. A built-in kind served from
its schema (``api.schema_kinds``) is documented the same way, its component named as
Kubernetes names it (``io.k8s.api.<group>.<version>.<Kind>``); a group-version holding kinds of
both sorts gets one document with both.

Limits: the built-in documents are built once, on first use (in a worker thread, see
``discovery``), and cached with their hash; the schemas say only what the pydantic models say (fields the models
keep as free-form objects stay free-form).
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import typing
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from api.registry import Registry, ResourceType

__all__ = ["OpenAPIV3", "component_name", "gv_path"]

log = logging.getLogger("kubelite.apiserver.openapi")

OPENAPI_VERSION = "3.0.0"
_REF_PREFIX = "#/components/schemas/"
INFO = {"title": "Kubernetes", "version": "v1.32.0-kubelite"}

# module of ours -> the Go package prefix Kubernetes names its components with
_PACKAGE_PREFIXES = {
    "api.meta": "io.k8s.apimachinery.pkg.apis.meta.v1",
    "api.quantity": "io.k8s.apimachinery.pkg.api.resource",
    "api.core": "io.k8s.api.core.v1",
    "api.apps": "io.k8s.api.apps.v1",
    "api.coordination": "io.k8s.api.coordination.v1",
    "api.autoscaling": "io.k8s.api.autoscaling.v2",
    "api.autoscaling_v1": "io.k8s.api.autoscaling.v1",
    "api.batch": "io.k8s.api.batch.v1",
    "api.policy": "io.k8s.api.policy.v1",
    "api.config": "io.k8s.api.core.v1",
    "api.persistentvolumes": "io.k8s.api.core.v1",
    "api.storage": "io.k8s.api.storage.v1",
}

# keys kube-openapi's Schema decodes that our schemas use; anything else is dropped
_SCHEMA_KEYS = {
    "type",
    "format",
    "description",
    "properties",
    "additionalProperties",
    "items",
    "required",
    "enum",
    "default",
    "$ref",
    "allOf",
    "oneOf",
    "anyOf",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "minLength",
    "maxLength",
    "pattern",
    "minItems",
    "maxItems",
    "uniqueItems",
    "minProperties",
    "maxProperties",
    "nullable",
}

_QUERY_PARAMS: dict[str, dict[str, Any]] = {
    name: {
        "name": name,
        "in": "query",
        "description": doc,
        "schema": {"type": type_, "uniqueItems": True},
    }
    for name, type_, doc in (
        ("dryRun", "string", "When present, modifications are not persisted."),
        ("fieldManager", "string", "Name of the actor making the change."),
        (
            "fieldValidation",
            "string",
            "How the server treats unknown or duplicate fields: Ignore, Warn or Strict.",
        ),
        ("force", "boolean", "Force apply requests to take ownership of conflicting fields."),
        ("pretty", "string", "If 'true', the output is pretty printed."),
        ("labelSelector", "string", "Restrict the list of returned objects by their labels."),
        ("fieldSelector", "string", "Restrict the list of returned objects by their fields."),
        ("resourceVersion", "string", "Which resourceVersion to serve from."),
        ("watch", "boolean", "Watch for changes instead of listing."),
        ("limit", "integer", "Maximum number of items to return."),
        ("continue", "string", "Continue token of a paginated list."),
        ("timeoutSeconds", "integer", "Timeout of the list/watch call."),
        ("allowWatchBookmarks", "boolean", "Request watch BOOKMARK events."),
        ("gracePeriodSeconds", "integer", "Seconds before the object is deleted."),
        ("propagationPolicy", "string", "Garbage collection: Orphan, Background or Foreground."),
    )
}


def component_name(module: str, name: str) -> str:
    """``api.core`` + ``Pod`` -> ``io.k8s.api.core.v1.Pod``; unknown modules keep their path."""
    prefix = _PACKAGE_PREFIXES.get(module, module)
    return re.sub(r"[^A-Za-z0-9_.-]", "_", f"{prefix}.{name}")


def _go_name(cls: type[BaseModel]) -> str:
    """The Go type a model stands for: its class name, or its ``go_name`` where two versions'
    models of one kind live side by side (``api.autoscaling_v1``)."""
    go_name = getattr(cls, "go_name", None)
    return go_name if isinstance(go_name, str) else cls.__name__


def gv_path(group: str, version: str) -> str:
    """The root index key and URL tail of a group-version: ``api/v1``, ``apis/apps/v1``."""
    return f"apis/{group}/{version}" if group else f"api/{version}"


def _reachable_models(roots: list[type[BaseModel]]) -> list[type[BaseModel]]:
    """Every model class the field annotations of ``roots`` lead to, ``roots`` included."""
    found: list[type[BaseModel]] = []
    pending: list[Any] = list(roots)
    while pending:
        item = pending.pop()
        if isinstance(item, type) and issubclass(item, BaseModel):
            if item in found:
                continue
            found.append(item)
            pending.extend(field.annotation for field in item.model_fields.values())
        else:
            pending.extend(typing.get_args(item))
    return found


def _json_schemas(models: list[type[BaseModel]]) -> tuple[dict[Any, Any], dict[str, Any]]:
    keys, top = models_json_schema(
        [(m, "validation") for m in models], by_alias=True, ref_template=_REF_PREFIX + "{model}"
    )
    return dict(keys), dict(top)


def _schema_ok(model: type[BaseModel]) -> bool:
    """Whether pydantic can describe ``model``; one odd model must not cost every document
    (its operations are still published, with a free-form body)."""
    try:
        model.model_json_schema(by_alias=True)
    except Exception:
        log.warning("no OpenAPI schema for %s; publishing its paths without one", model.__name__)
        return False
    return True


def _rename_refs(node: Any, names: dict[str, str]) -> Any:
    if isinstance(node, list):
        return [_rename_refs(item, names) for item in node]
    if not isinstance(node, dict):
        return node
    out = {key: _rename_refs(value, names) for key, value in node.items()}
    ref = out.get("$ref")
    if isinstance(ref, str) and ref.startswith(_REF_PREFIX):
        short = ref.removeprefix(_REF_PREFIX)
        out["$ref"] = _REF_PREFIX + names.get(short, short)
    return out


def _to_openapi30(node: Any) -> Any:
    """Rewrite one JSON Schema (2020-12, as pydantic writes it) into OpenAPI 3.0 terms."""
    if isinstance(node, list):
        return [_to_openapi30(item) for item in node]
    if not isinstance(node, dict):
        return node
    schema = dict(node)
    for key in ("anyOf", "oneOf"):
        if key in schema:
            options = [o for o in schema[key] if o != {"type": "null"}]
            if len(options) < len(schema[key]):
                schema["nullable"] = True
            if len(options) == 1:
                del schema[key]
                schema = {**options[0], **schema}
            else:
                schema[key] = options
    if "const" in schema:
        schema["enum"] = [schema.pop("const")]
    if schema.get("default", 0) is None:
        del schema["default"]
    for bound, plain in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
        if isinstance(schema.get(bound), int | float) and not isinstance(schema[bound], bool):
            schema[plain] = schema[bound]
            schema[bound] = True
    if schema.get("type") == "null":
        del schema["type"]
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "properties":
            out[key] = {name: _to_openapi30(sub) for name, sub in value.items()}
        elif key in ("items", "additionalProperties", "allOf", "oneOf", "anyOf"):
            out[key] = _to_openapi30(value)
        elif key in _SCHEMA_KEYS or key.startswith("x-kubernetes-"):
            out[key] = value
    if out.get("additionalProperties") is True and "properties" in out:
        del out[
            "additionalProperties"
        ]  # pydantic's extra="allow"; Go structs declare no such thing
    if "$ref" in out and len(out) > 1:
        # OpenAPI 3.0 ignores $ref siblings; Kubernetes wraps the reference in allOf
        out["allOf"] = [{"$ref": out.pop("$ref")}]
    return out


_API_VERSION_DOC = (
    "APIVersion defines the versioned schema of this representation of an object. Servers "
    "should convert recognized schemas to the latest internal value, and may reject "
    "unrecognized values."
)
_KIND_DOC = (
    "Kind is a string value representing the REST resource this object represents. Servers may "
    "infer this from the endpoint the client submits requests to. Cannot be updated. In "
    "CamelCase."
)


def _serialised(doc: dict[str, Any]) -> tuple[bytes, str]:
    """A document's bytes and its ETag (the hash clients address it by)."""
    data = json.dumps(doc, separators=(",", ":"), sort_keys=True).encode()
    return data, '"' + hashlib.sha512(data).hexdigest().upper() + '"'


def _gvk(rt: ResourceType, kind: str | None = None) -> dict[str, str]:
    return {"group": rt.group, "version": rt.version, "kind": kind or rt.kind}


def _merged(models: dict[str, Any], schemas: dict[str, Any]) -> dict[str, Any]:
    """One group-version's document from its model-described kinds' and its schema-described
    kinds' (a CRD in a built-in group, a built-in kind served from its schema beside others)."""
    components = {
        **models["components"]["schemas"],
        **schemas["components"]["schemas"],
    }
    return {
        **models,
        "paths": {**models["paths"], **schemas["paths"]},
        "components": {"schemas": dict(sorted(components.items()))},
    }


class OpenAPIV3:
    """The OpenAPI v3 documents of one registry, built once on first use."""

    def __init__(self, registry: Registry) -> None:
        self._registry = registry
        self._builtin: dict[str, tuple[bytes, str]] | None = None
        self._schemas: dict[str, Any] = {}
        self._docs: dict[str, tuple[bytes, str]] | None = None
        self._root: tuple[bytes, str] | None = None
        self._custom_stale = True

    def refresh_custom(self) -> None:
        """The custom kinds changed: their documents (and the root's hashes) are made again on
        the next read — cheaply, from the CRDs' schemas."""
        self._custom_stale = True

    # -- public

    @property
    def built(self) -> bool:
        return self._builtin is not None

    def build(self) -> None:
        """Generate every document now (idempotent); otherwise the first read does."""
        self._build()

    def root_body(self) -> tuple[bytes, str]:
        """The serialised root index and its ETag."""
        self._build()
        assert self._root is not None
        return self._root

    def document_body(self, path: str) -> tuple[bytes, str] | None:
        """The serialised document of ``path`` (``api/v1``, ``apis/apps/v1``) and its ETag."""
        self._build()
        assert self._docs is not None
        return self._docs.get(path.strip("/"))

    def root(self) -> dict[str, Any]:
        root: dict[str, Any] = json.loads(self.root_body()[0])
        return root

    def document(self, path: str) -> dict[str, Any] | None:
        body = self.document_body(path)
        return None if body is None else json.loads(body[0])

    # -- building

    def _build(self) -> None:
        if self._builtin is None:
            schemas = self._component_schemas()
            builtin: dict[str, tuple[bytes, str]] = {}
            for group, version in self._group_versions(custom=False):
                builtin[gv_path(group, version)] = _serialised(
                    self._document(group, version, schemas)
                )
            self._schemas, self._builtin = schemas, builtin
        if self._custom_stale or self._docs is None:
            self._custom_stale = False
            self._assemble(self._builtin)

    def _group_versions(self, *, custom: bool) -> list[tuple[str, str]]:
        out: list[tuple[str, str]] = []
        for rt in self._registry.every_version():
            if (rt.custom is not None) == custom and (rt.group, rt.version) not in out:
                out.append((rt.group, rt.version))
        return out

    def _assemble(self, builtin: dict[str, tuple[bytes, str]]) -> None:
        docs = dict(builtin)
        for group, version in self._group_versions(custom=True):
            path = gv_path(group, version)
            document = self._custom_document(group, version)
            if path in builtin:  # kinds of both sorts in one group-version: one document
                document = _merged(json.loads(builtin[path][0]), document)
            docs[path] = _serialised(document)
        index = {
            path: {"serverRelativeURL": f"/openapi/v3/{path}?hash={etag.strip(chr(34))}"}
            for path, (_, etag) in docs.items()
        }
        root = json.dumps({"paths": index}, separators=(",", ":")).encode()
        self._root = (root, '"' + hashlib.sha512(root).hexdigest().upper() + '"')
        self._docs = docs

    def _custom_document(self, group: str, version: str) -> dict[str, Any]:
        """A CRD version's document: its schema as the kind's component (with apiVersion,
        kind and ObjectMeta, as Kubernetes' builder adds them), and its paths."""
        paths: dict[str, Any] = {}
        components: dict[str, Any] = {}
        meta_ref = component_name("api.meta", "ObjectMeta")
        for rt in self._registry:
            if rt.custom is None or (rt.group, rt.version) != (group, version):
                continue
            name = (
                f"io.k8s.api.{rt.group.split('.')[0]}.{rt.version}.{rt.kind}"
                if rt.custom.builtin
                else ".".join([*reversed(rt.group.split(".")), rt.version, rt.kind])
            )
            schema = dict(rt.custom.schema)
            schema["properties"] = {
                "apiVersion": {"type": "string", "description": _API_VERSION_DOC},
                "kind": {"type": "string", "description": _KIND_DOC},
                "metadata": {"$ref": f"#/components/schemas/{meta_ref}"},
                **{k: v for k, v in (schema.get("properties") or {}).items() if k != "metadata"},
            }
            schema["type"] = "object"
            schema["x-kubernetes-group-version-kind"] = [_gvk(rt)]
            components[name] = schema
            paths.update(self._resource_paths(rt, name))
        components.update(self._closure({meta_ref}, self._schemas))
        return {
            "openapi": OPENAPI_VERSION,
            "info": INFO,
            "paths": paths,
            "components": {"schemas": dict(sorted(components.items()))},
        }

    def _component_schemas(self) -> dict[str, Any]:
        models: list[type[BaseModel]] = []
        for rt in self._registry.every_version():
            if rt.custom is None and rt.model not in models:
                models.append(rt.model)
        try:
            keys, top = _json_schemas(models)
        except Exception:
            models = [m for m in models if _schema_ok(m)]  # slower: one model at a time
            keys, top = _json_schemas(models)
        # pydantic names definitions after the class; Kubernetes after the Go package and type
        names = {
            cls.__name__: component_name(cls.__module__, _go_name(cls))
            for cls in _reachable_models(models)
        }
        defs = {
            names.get(short, short): _to_openapi30(_rename_refs(schema, names))
            for short, schema in top.get("$defs", {}).items()
        }
        keys = {key: _rename_refs(value, names) for key, value in keys.items()}
        for rt in self._registry.every_version():
            if rt.custom is not None:
                continue
            ref = keys.get((rt.model, "validation"), {}).get("$ref", "")
            name = ref.rsplit("/", 1)[-1]
            if name in defs:
                tags = defs[name].setdefault("x-kubernetes-group-version-kind", [])
                if _gvk(rt) not in tags:
                    tags.append(_gvk(rt))
        return defs

    def _document(self, group: str, version: str, schemas: dict[str, Any]) -> dict[str, Any]:
        paths: dict[str, Any] = {}
        used: set[str] = set()
        for rt in self._registry.every_version():
            if (rt.group, rt.version) != (group, version):
                continue
            ref = self._ref_of(rt, schemas)
            if ref:
                used.add(ref)
            paths.update(self._resource_paths(rt, ref))
        return {
            "openapi": OPENAPI_VERSION,
            "info": INFO,
            "paths": paths,
            "components": {"schemas": self._closure(used, schemas)},
        }

    @staticmethod
    def _ref_of(rt: ResourceType, schemas: dict[str, Any]) -> str | None:
        for name, schema in schemas.items():
            if _gvk(rt) in schema.get("x-kubernetes-group-version-kind", []):
                return name
        return None

    @staticmethod
    def _closure(roots: set[str], schemas: dict[str, Any]) -> dict[str, Any]:
        """``roots`` and every schema they reference, transitively."""
        seen: dict[str, Any] = {}
        pending = sorted(roots)
        while pending:
            name = pending.pop()
            if name in seen or name not in schemas:
                continue
            seen[name] = schemas[name]
            for found in re.findall(r'"#/components/schemas/([^"]+)"', json.dumps(schemas[name])):
                pending.append(found)
        return dict(sorted(seen.items()))

    def _resource_paths(self, rt: ResourceType, ref: str | None) -> dict[str, Any]:
        base = f"/api/{rt.version}" if not rt.group else f"/apis/{rt.group}/{rt.version}"
        scope = f"{base}/namespaces/{{namespace}}" if rt.namespaced else base
        collection = f"{scope}/{rt.plural}"
        item = f"{collection}/{{name}}"
        path_params = [
            {"name": "name", "in": "path", "required": True, "schema": {"type": "string"}}
        ]
        if rt.namespaced:
            path_params.append(
                {"name": "namespace", "in": "path", "required": True, "schema": {"type": "string"}}
            )
        body = {"$ref": f"#/components/schemas/{ref}"} if ref else {"type": "object"}
        gvk = _gvk(rt)
        op_kind = rt.kind
        op_group = (rt.group.split(".")[0] or "core").capitalize()  # readCoreV1NamespacedPod
        op_scope = "Namespaced" if rt.namespaced else ""

        def op(
            verb: str, action: str, op_id: str, params: list[str], *, with_body: bool = False
        ) -> dict[str, Any]:
            operation: dict[str, Any] = {
                "operationId": f"{verb}{op_group}{rt.version.capitalize()}{op_id}",
                "x-kubernetes-action": action,
                "x-kubernetes-group-version-kind": gvk,
                "parameters": [_QUERY_PARAMS[p] for p in params],
                "responses": {
                    "200": {
                        "description": "OK",
                        "content": {"application/json": {"schema": body}},
                    },
                    "401": {"description": "Unauthorized"},
                },
            }
            if with_body:
                operation["requestBody"] = {
                    "required": True,
                    "content": {"*/*": {"schema": body}},
                }
            return operation

        verbs = set(rt.verbs)
        coll: dict[str, Any] = {}
        if "list" in verbs:
            coll["get"] = op(
                "list",
                "list",
                f"{op_scope}{op_kind}",
                [
                    "pretty",
                    "labelSelector",
                    "fieldSelector",
                    "resourceVersion",
                    "watch",
                    "limit",
                    "continue",
                    "timeoutSeconds",
                    "allowWatchBookmarks",
                ],
            )
        if "create" in verbs:
            coll["post"] = op(
                "create",
                "post",
                f"{op_scope}{op_kind}",
                ["pretty", "dryRun", "fieldManager", "fieldValidation"],
                with_body=True,
            )
        one: dict[str, Any] = {}
        if "get" in verbs:
            one["get"] = op("read", "get", f"{op_scope}{op_kind}", ["pretty"])
        if "update" in verbs:
            one["put"] = op(
                "replace",
                "put",
                f"{op_scope}{op_kind}",
                ["pretty", "dryRun", "fieldManager", "fieldValidation"],
                with_body=True,
            )
        if "patch" in verbs:
            # no requestBody on purpose: see the module docstring
            one["patch"] = op(
                "patch",
                "patch",
                f"{op_scope}{op_kind}",
                ["pretty", "dryRun", "fieldManager", "fieldValidation", "force"],
            )
        if "delete" in verbs:
            one["delete"] = op(
                "delete",
                "delete",
                f"{op_scope}{op_kind}",
                ["pretty", "dryRun", "gracePeriodSeconds", "propagationPolicy"],
            )
        paths: dict[str, Any] = {}
        if coll:
            paths[collection] = {
                **coll,
                **({"parameters": path_params[1:]} if rt.namespaced else {}),
            }
        if one:
            paths[item] = {**one, "parameters": path_params}
        if rt.has_status:
            paths[f"{item}/status"] = {
                "get": op("read", "get", f"{op_scope}{op_kind}Status", ["pretty"]),
                "put": op(
                    "replace",
                    "put",
                    f"{op_scope}{op_kind}Status",
                    ["pretty", "dryRun", "fieldManager", "fieldValidation"],
                    with_body=True,
                ),
                "patch": op(
                    "patch",
                    "patch",
                    f"{op_scope}{op_kind}Status",
                    ["pretty", "dryRun", "fieldManager", "fieldValidation", "force"],
                ),
                "parameters": path_params,
            }
        return paths
