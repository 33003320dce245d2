"""Building blocks every REST handler shares: body-vs-URL checks, patches, dry run, responses.

Why: the main resource handlers (``rest``) and the subresource handlers (``subresources``) make
the same checks the same way — a body whose kind, apiVersion, name or namespace disagrees with
the URL is a 400 worded as Kubernetes words it; a patch is applied by its content type; a
``dryRun=All`` request skips only the write; a read answers JSON or, for kubectl, a Table.

A version served from another's storage is converted on the way in (``stored_as``) and out
(``object_response``).

Limits: only ``dryRun=All`` (what Kubernetes accepts); Tables only where ``tables`` has a printer
(else NAME/AGE).
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from api.errors import BadRequest, MethodNotAllowed, NotFound, UnsupportedMediaType
from api.patches import apply_json_patch, apply_merge_patch, apply_strategic_merge_patch
from api.registry import Registry, ResourceType
from services.apiserver.codec import PatchType, json_response
from services.apiserver.custom_objects import served_as
from services.apiserver.tables import TABLE_CONTENT_TYPE, to_table, wants_table

__all__ = [
    "apply_patch",
    "check_body_identity",
    "is_dry_run",
    "method_not_allowed",
    "no_route",
    "object_response",
    "require_verb",
    "stored_as",
]

Obj = dict[str, Any]


def no_route() -> NotFound:
    return NotFound("the server could not find the requested resource")


def method_not_allowed() -> MethodNotAllowed:
    return MethodNotAllowed("the server does not allow this method on the requested resource")


def require_verb(rt: ResourceType, verb: str) -> None:
    if verb not in rt.verbs:
        raise method_not_allowed()


def is_dry_run(request: web.Request) -> bool:
    values = request.query.getall("dryRun", [])
    for value in values:
        if value != "All":
            raise BadRequest(f'dryRun: Unsupported value: "{value}": supported values: "All"')
    return bool(values)


def object_response(
    request: web.Request, rt: ResourceType, obj: Obj, *, status: int = 200
) -> web.Response:
    """One object as JSON, or as a one-row Table when the client asked for Tables; a custom
    object as the version asked for serves it."""
    obj = served_as(rt, obj)
    if wants_table(request.headers.get("Accept")):
        table = to_table(
            rt,
            [obj],
            include_object=request.query.get("includeObject", "Metadata"),
            resource_version=str((obj.get("metadata") or {}).get("resourceVersion") or ""),
        )
        return json_response(table, status=status, content_type=TABLE_CONTENT_TYPE)
    return json_response(obj, status=status)


def stored_as(registry: Registry, rt: ResourceType, obj: Obj) -> tuple[ResourceType, Obj]:
    """A body written to ``rt`` as it is stored, with the stored version's type: a version served
    from another's storage (autoscaling/v1 HorizontalPodAutoscaler) is converted, and the write's
    admission, defaults, validation and storage run on the stored version (Kubernetes runs them
    on its internal version). The body is checked against ``rt`` (``check_body_identity``) first.
    """
    if rt.conversion is None:
        return rt, obj
    return registry.stored(rt), rt.conversion.to_storage(obj)


def check_body_identity(
    rt: ResourceType, obj: Obj, *, namespace: str | None, name: str | None
) -> dict[str, Any]:
    """Check the body against the URL; fill in kind, apiVersion and namespace. Returns metadata."""
    kind, api_version = obj.get("kind"), obj.get("apiVersion")
    if (kind and kind != rt.kind) or (api_version and api_version != rt.api_version):
        raise BadRequest(
            f"the API version in the data ({api_version or ''}) does not match the expected API "
            f"version ({rt.api_version})"
            if api_version and api_version != rt.api_version
            else f"the object provided is unrecognized (must be of type {rt.kind}): "
            f"kind {kind!r} does not match"
        )
    rest = {k: obj.pop(k) for k in list(obj) if k not in ("kind", "apiVersion")}
    obj.update(kind=rt.kind, apiVersion=rt.api_version, **rest)
    meta = obj.get("metadata")
    if meta is None:
        meta = obj["metadata"] = {}
    if not isinstance(meta, dict):
        raise BadRequest("the object's metadata must be an object")
    if rt.namespaced:
        body_ns = meta.get("namespace")
        if body_ns and body_ns != namespace:
            raise BadRequest(
                "the namespace of the provided object does not match the namespace sent on the request"
            )
        meta["namespace"] = namespace
    else:
        meta.pop("namespace", None)
    if name is not None and meta.get("name") != name:
        raise BadRequest(
            f"the name of the object ({meta.get('name') or ''}) does not match the name on the URL ({name})"
        )
    return meta


def apply_patch(rt: ResourceType, current: Obj, patch_type: PatchType, patch: Any) -> Obj:
    """``current`` with ``patch`` applied; the result must still be an object of ``rt``."""
    if patch_type is PatchType.JSON:
        result: Any = apply_json_patch(current, patch)
    elif patch_type is PatchType.MERGE:
        result = apply_merge_patch(current, patch)
    elif patch_type is PatchType.APPLY:
        # server-side apply is the handlers' own step (``apply``) where it is served
        raise UnsupportedMediaType(
            "the body of the request was in an unknown format - accepted media types include: "
            + ", ".join(p.value for p in PatchType if p is not PatchType.APPLY)
        )
    elif rt.custom is not None and not rt.custom.builtin:
        # custom kinds have no patch strategies: Kubernetes answers 415 to a strategic merge
        raise UnsupportedMediaType(
            "the body of the request was in an unknown format - accepted media types include: "
            + ", ".join(p.value for p in PatchType if p is not PatchType.STRATEGIC)
        )
    else:
        result = apply_strategic_merge_patch(current, patch, kind=rt.kind)
    if not isinstance(result, dict):
        raise BadRequest("the patch did not result in an object")
    return result
