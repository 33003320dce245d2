"""Subresources: ``status``, ``pods/binding``, ``scale``, ``namespaces/finalize`` and
``serviceaccounts/token`` (``token_request``).

Why: Kubernetes splits who may write what. Controllers and kubelets write ``status`` through
``.../status`` (which changes nothing else), users write ``spec`` through the main resource (which
ignores status); the scheduler assigns a node only through ``binding``, which sets
``spec.nodeName`` once and adds the ``PodScheduled`` condition; ``kubectl scale`` reads and writes
an ``autoscaling/v1`` ``Scale`` view of a controller's ``spec.replicas``; and only the namespace
controller empties a namespace's ``spec.finalizers`` (``.../finalize``).

Each write is one ``guaranteed_update`` on the parent object: concurrent binds of one pod are
serialised by the store's compare-and-swap, and exactly one wins (the others get 409).

``eviction`` is a delete that honours PodDisruptionBudgets (``services.apiserver.eviction``).

Limits: ``log`` and ``exec`` are not served here (they proxy to kubelets in a later issue).
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from aiohttp import web

from api.errors import BadRequest, Conflict, Invalid
from api.meta import now_time
from api.registry import ResourceType
from api.selectors import label_selector_from_dict
from services.apiserver.admission import mutate_dynamically, validate_dynamically
from services.apiserver.apply import apply_options, apply_to, record_update
from services.apiserver.codec import PatchType, json_response, read_object, read_patch
from services.apiserver.context import ApiContext
from services.apiserver.custom_objects import (
    custom_generation,
    custom_scale,
    set_custom_replicas,
)
from services.apiserver.eviction import evict
from services.apiserver.handlers import (
    apply_patch,
    check_body_identity,
    is_dry_run,
    method_not_allowed,
    no_route,
    object_response,
    stored_as,
)
from services.apiserver.identity import request_user
from services.apiserver.node_restriction import UPDATE, Write, admit
from services.apiserver.strategy import prepare_for_status_update, validate_status_object
from services.apiserver.token_request import create_token
from services.apiserver.webhooks import Attributes

if TYPE_CHECKING:  # rest.py dispatches here, so the import runs one way only
    from services.apiserver.rest import Target

__all__ = ["bind", "dispatch", "scale_of"]

Obj = dict[str, Any]


async def dispatch(request: web.Request, ctx: ApiContext, target: Target) -> web.StreamResponse:
    rt: ResourceType = target.rt
    sub = target.subresource
    if target.name is None or not any(s.name == sub for s in rt.subresources):
        raise no_route()
    method = request.method
    if sub == "status":
        if method == "GET":
            obj = await ctx.storage(rt).get(target.namespace, target.name)
            return object_response(request, rt, obj)
        if method in ("PUT", "PATCH"):
            return await _write_status(request, ctx, target)
        raise method_not_allowed()
    if sub == "binding" and rt.kind == "Pod":
        if method != "POST":
            raise method_not_allowed()
        return await bind(request, ctx, target, await read_object(request))
    if sub == "scale":
        if method == "GET":
            obj = await ctx.storage(rt).get(target.namespace, target.name)
            return json_response(scale_of(rt, obj))
        if method in ("PUT", "PATCH"):
            return await _write_scale(request, ctx, target)
        raise method_not_allowed()
    if sub == "eviction" and rt.kind == "Pod":
        if method != "POST":
            raise method_not_allowed()
        return await evict(request, ctx, target)
    if sub == "token" and rt.kind == "ServiceAccount":
        if method != "POST":
            raise method_not_allowed()
        return await create_token(request, ctx, target)
    if sub == "finalize" and rt.kind == "Namespace":
        if method != "PUT":
            raise method_not_allowed()
        return await _finalize(request, ctx, target)
    raise no_route()


async def _write_status(request: web.Request, ctx: ApiContext, target: Target) -> web.Response:
    """A status write as the asked version says it, run on the stored version (``stored_as``)."""
    served: ResourceType = target.rt
    rt = ctx.registry.stored(served)
    name = str(target.name)
    storage = ctx.storage(rt)
    body: Obj | None
    if request.method == "PUT":
        body = await read_object(request)
        check_body_identity(served, body, namespace=target.namespace, name=name)
        _, body = stored_as(ctx.registry, served, body)
        patch_doc: Any = None
        patch_type = None
    else:
        patch_type, patch_doc = await read_patch(request)
        body = None
    options = apply_options(request, patch_type) if patch_type else None
    dry_run = is_dry_run(request)
    dry: list[Obj] = []

    async def mutate(current: Obj) -> Obj:
        live = current if served.conversion is None else served.conversion.from_storage(current)
        if body is not None:
            new = body  # prepare_for_status_update takes its status
        elif patch_type is PatchType.APPLY and options is not None:
            check_body_identity(served, patch_doc, namespace=target.namespace, name=name)
            new = apply_to(
                served, live=live, config=patch_doc, options=options, subresource="status"
            )
            _, new = stored_as(ctx.registry, served, new)
        else:
            assert patch_type is not None
            new = apply_patch(served, live, patch_type, patch_doc)
            check_body_identity(served, new, namespace=target.namespace, name=name)
            _, new = stored_as(ctx.registry, served, new)
        wanted = (new.get("metadata") or {}).get("resourceVersion")
        if wanted and wanted != current["metadata"].get("resourceVersion"):
            raise storage.conflict(name)
        out = prepare_for_status_update(rt, new, current)
        if patch_type is PatchType.APPLY:
            out["metadata"].pop("managedFields", None)
            out["metadata"].update(
                {k: v for k, v in new["metadata"].items() if k == "managedFields"}
            )
        else:
            record_update(request, rt, old=current, new=out, subresource="status")
        attrs = Attributes(
            rt=rt,
            operation=UPDATE,
            namespace=target.namespace,
            name=name,
            user=request_user(request),
            subresource="status",
            dry_run=dry_run,
        )
        out = await mutate_dynamically(request, attrs, out, old=current)
        validate_status_object(rt, out, old=current)
        write = Write(rt, UPDATE, target.namespace, name, subresource="status")
        admit(request, write, obj=out, old=current)
        await validate_dynamically(request, attrs, out, old=current)
        if dry_run:
            dry.append(out)
            return current
        return out

    result = await storage.guaranteed_update(target.namespace, name, mutate)
    return object_response(request, served, dry[-1] if dry else result.obj)


async def bind(request: web.Request, ctx: ApiContext, target: Target, body: Obj) -> web.Response:
    """``POST pods/{name}/binding`` or ``POST bindings``: set ``spec.nodeName`` exactly once."""
    pods = ctx.resource("", "pods")
    meta = body.get("metadata") if isinstance(body.get("metadata"), dict) else {}
    assert isinstance(meta, dict)
    name = target.name if target.name is not None and target.subresource else meta.get("name")
    if body.get("kind") not in (None, "Binding"):
        raise BadRequest(
            f"the object provided is unrecognized (must be of type Binding): {body.get('kind')}"
        )
    if meta.get("name") and target.subresource and meta.get("name") != target.name:
        raise BadRequest(
            f"the name of the object ({meta.get('name')}) does not match the name on the URL ({target.name})"
        )
    if meta.get("namespace") and meta.get("namespace") != target.namespace:
        raise BadRequest(
            "the namespace of the provided object does not match the namespace sent on the request"
        )
    target_ref = body.get("target")
    node = target_ref.get("name") if isinstance(target_ref, dict) else None
    causes = []
    if not name:
        causes.append(
            {"reason": "FieldValueRequired", "message": "Required value", "field": "metadata.name"}
        )
    if not node or not isinstance(node, str):
        causes.append(
            {"reason": "FieldValueRequired", "message": "Required value", "field": "target.name"}
        )
    elif isinstance(target_ref, dict) and target_ref.get("kind") not in (None, "", "Node"):
        causes.append(
            {
                "reason": "FieldValueNotSupported",
                "message": f'Unsupported value: "{target_ref.get("kind")}": supported values: "Node"',
                "field": "target.kind",
            }
        )
    if causes:
        raise Invalid.of("Binding", str(name or ""), causes)
    name = str(name)
    annotations = meta.get("annotations") if isinstance(meta.get("annotations"), dict) else {}
    storage = ctx.storage(pods)

    def binding_conflict(detail: str) -> Conflict:
        return Conflict.of("pods/binding", name, detail=detail)

    async def mutate(pod: Obj) -> Obj:
        """Set the node on ``pod``, guaranteed_update's private copy, and return it."""
        if pod["metadata"].get("deletionTimestamp"):
            raise binding_conflict(f"pod {name} is being deleted, cannot be assigned to a host")
        assigned = (pod.get("spec") or {}).get("nodeName")
        if assigned:
            raise binding_conflict(f'pod {name} is already assigned to node "{assigned}"')
        pod.setdefault("spec", {})["nodeName"] = node
        if annotations:
            pod["metadata"].setdefault("annotations", {}).update(annotations)
        status = pod.setdefault("status", {})
        conditions = [c for c in status.get("conditions") or [] if c.get("type") != "PodScheduled"]
        conditions.append(
            {
                "type": "PodScheduled",
                "status": "True",
                "lastProbeTime": None,
                "lastTransitionTime": now_time(),
            }
        )
        status["conditions"] = conditions
        return pod

    await storage.guaranteed_update(target.namespace, name, mutate)
    return json_response(
        {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201},
        status=201,
    )


def _selector_string(rt: ResourceType, obj: Obj) -> str:
    selector = (obj.get("spec") or {}).get("selector")
    if rt.group == "" and isinstance(selector, dict):
        return ",".join(f"{k}={v}" for k, v in sorted(selector.items()))
    if isinstance(selector, dict):
        try:
            return str(label_selector_from_dict(selector))
        except BadRequest:
            return ""
    return ""


def scale_of(rt: ResourceType, obj: Obj) -> Obj:
    """The ``autoscaling/v1`` Scale view of a replicated object."""
    custom = custom_scale(rt, obj)
    if custom is not None:
        return custom
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    scale_meta = {
        k: meta[k]
        for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
        if k in meta
    }
    replicas = spec.get("replicas")
    return {
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": scale_meta,
        "spec": {"replicas": replicas if isinstance(replicas, int) else 1},
        "status": {
            "replicas": int(status.get("replicas") or 0),
            "selector": _selector_string(rt, obj),
        },
    }


async def _write_scale(request: web.Request, ctx: ApiContext, target: Target) -> web.Response:
    rt: ResourceType = target.rt
    name = str(target.name)
    storage = ctx.storage(rt)
    if request.method == "PUT":
        body: Obj | None = await read_object(request)
        patch_type, patch_doc = None, None
    else:
        body = None
        patch_type, patch_doc = await read_patch(request)
    dry_run = is_dry_run(request)
    dry: list[Obj] = []

    async def mutate(current: Obj) -> Obj:
        scale = scale_of(rt, current)
        if body is not None:
            new_scale = copy.deepcopy(body)
        else:
            assert patch_type is not None
            new_scale = _patch_scale(rt, scale, patch_type, patch_doc)
        if new_scale.get("kind") not in (None, "Scale"):
            raise BadRequest(
                f"the object provided is unrecognized (must be of type Scale): {new_scale.get('kind')}"
            )
        scale_meta = (
            new_scale.get("metadata") if isinstance(new_scale.get("metadata"), dict) else {}
        )
        assert isinstance(scale_meta, dict)
        if scale_meta.get("name") not in (None, name):
            raise BadRequest(
                f"the name of the object ({scale_meta.get('name')}) does not match the name on the URL ({name})"
            )
        wanted = scale_meta.get("resourceVersion")
        if wanted and wanted != current["metadata"].get("resourceVersion"):
            raise storage.conflict(name)
        spec = new_scale.get("spec") if isinstance(new_scale.get("spec"), dict) else {}
        assert isinstance(spec, dict)
        replicas = spec.get("replicas", 0)
        if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
            raise Invalid.of(
                "Scale",
                name,
                [
                    {
                        "reason": "FieldValueInvalid",
                        "message": f"Invalid value: {replicas!r}: must be greater than or equal to 0",
                        "field": "spec.replicas",
                    }
                ],
                group="autoscaling",
            )
        new = copy.deepcopy(current)
        if set_custom_replicas(rt, new, replicas):
            new["metadata"]["generation"] = custom_generation(rt, new, current)
        else:
            new.setdefault("spec", {})["replicas"] = replicas
            if new["spec"] != current.get("spec"):
                new["metadata"]["generation"] = int(current["metadata"].get("generation") or 1) + 1
        record_update(request, rt, old=current, new=new, subresource="scale")
        if dry_run:
            dry.append(new)
            return current
        return new

    result = await storage.guaranteed_update(target.namespace, name, mutate)
    return json_response(scale_of(rt, dry[-1] if dry else result.obj))


def _patch_scale(rt: ResourceType, scale: Obj, patch_type: PatchType, patch_doc: Any) -> Obj:

    if patch_type is PatchType.STRATEGIC:
        patch_type = PatchType.MERGE  # a Scale has no lists to merge by key
    return apply_patch(rt, scale, patch_type, patch_doc)


async def _finalize(request: web.Request, ctx: ApiContext, target: Target) -> web.Response:
    """``PUT namespaces/{name}/finalize``: replace ``spec.finalizers``, nothing else."""
    rt: ResourceType = target.rt
    name = str(target.name)
    body = await read_object(request)
    check_body_identity(rt, body, namespace=None, name=name)
    finalizers = (body.get("spec") or {}).get("finalizers") or []
    if not isinstance(finalizers, list) or not all(isinstance(f, str) for f in finalizers):
        raise BadRequest("spec.finalizers must be a list of strings")
    storage = ctx.storage(rt)

    async def mutate(current: Obj) -> Obj:
        new = copy.deepcopy(current)
        new.setdefault("spec", {})["finalizers"] = list(finalizers)
        return new

    result = await storage.guaranteed_update(None, name, mutate)
    return json_response(result.obj)
