"""Admission: cluster-level rules a write must pass before it reaches the store.

Why: some refusals depend on *other* objects, not on the object written — Kubernetes'
NamespaceLifecycle plugin refuses new content in a namespace that does not exist (404
``namespaces "x" not found``) or is being deleted (403 ``unable to create new content in
namespace x because it is being terminated``), and refuses to delete the namespaces the system
needs (403 ``this namespace may not be deleted``). Those rules live here.

Kubernetes' DefaultStorageClass plugin is here too: a PersistentVolumeClaim created without
``spec.storageClassName`` (absent or null; ``""`` means "no class" and is left alone) gets the
class annotated ``storageclass.kubernetes.io/is-default-class: "true"`` — the newest one if
several are, as Kubernetes picks since 1.26 — and none when no class is the default.

New pods pass Kubernetes' ServiceAccount plugin (``serviceaccount_admission``): an account,
and its token volume.

Dynamic admission comes last, as in Kubernetes' plugin order: ``mutate_dynamically`` (the
mutating webhooks, ``webhooks``) after the built-in mutations and defaults, and
``validate_dynamically`` (the validating webhooks, then the ValidatingAdmissionPolicies,
``validating_policy``) after schema validation, just before the write; a DELETE goes through
both (``admit_delete_dynamically``), the mutating webhooks seeing no object to change, and so
does a CONNECT to ``exec`` or ``portforward`` (``admit_connect``), its options as the object.

Limits: the namespace is looked up in the namespaces watch cache, falling back to the store,
so a namespace created a moment ago is found; a namespace deleted concurrently with a create
may still admit it (the same race exists in Kubernetes — the namespace controller cleans up).
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from api.errors import Forbidden, NotFound
from api.registry import ResourceType
from api.storage import is_default_class
from services.apiserver import validating_policy, webhooks
from services.apiserver.context import ApiContext
from services.apiserver.forbidden import forbidden_resource
from services.apiserver.priority_admission import admit_priority, admit_priority_update
from services.apiserver.serviceaccount_admission import admit_pod
from services.apiserver.webhooks import Attributes

__all__ = [
    "admit_connect",
    "admit_create",
    "admit_delete",
    "admit_delete_dynamically",
    "admit_update",
    "mutate_dynamically",
    "validate_dynamically",
]

Obj = dict[str, Any]


async def admit_create(
    ctx: ApiContext,
    rt: ResourceType,
    *,
    namespace: str | None,
    name: str,
    obj: dict[str, Any] | None = None,
) -> None:
    """Refuse a create into a missing or terminating namespace; give a new claim (``obj``,
    changed in place) the default storage class, and a new pod its service account and its
    priority (``priority_admission``, which also keeps PriorityClasses to one default)."""
    if not rt.namespaced or namespace is None:
        if obj is not None:
            await admit_priority(ctx, rt, obj, name=name)
        return
    if obj is not None and rt.group == "" and rt.kind == "PersistentVolumeClaim":
        await _default_storage_class(ctx, obj)
    ns = await ctx.cached_get(ctx.resource("", "namespaces"), None, namespace)
    if ns is None:
        raise NotFound.of("namespaces", namespace)
    terminating = (ns.get("metadata") or {}).get("deletionTimestamp") or (
        (ns.get("status") or {}).get("phase") == "Terminating"
    )
    if terminating:
        raise forbidden_resource(
            rt.plural,
            rt.group,
            name,
            f"unable to create new content in namespace {namespace} because it is being terminated",
        )
    if obj is not None and rt.group == "" and rt.kind == "Pod":
        await admit_pod(ctx, obj, namespace=namespace)
        await admit_priority(ctx, rt, obj, name=name)


async def admit_update(ctx: ApiContext, rt: ResourceType, new: Obj, *, old: Obj) -> None:
    """The built-in mutating admission of an update (``new`` changed in place): a pod keeps the
    priority it was given, and a PriorityClass becomes the default only while no other is
    (``priority_admission``)."""
    await admit_priority_update(ctx, rt, new, old=old)


async def _default_storage_class(ctx: ApiContext, claim: dict[str, Any]) -> None:
    spec = claim.get("spec")
    if not isinstance(spec, dict) or spec.get("storageClassName") is not None:
        return
    sc_rt = ctx.resource("storage.k8s.io", "storageclasses")
    classes = (await ctx.storage(sc_rt).list(None)).items
    defaults = [sc for sc in classes if is_default_class(sc)]
    if not defaults:
        return
    # newest first; equally old ones by name (getDefaultClass)
    defaults.sort(key=lambda sc: str(sc["metadata"].get("name") or ""))
    defaults.sort(key=lambda sc: str(sc["metadata"].get("creationTimestamp") or ""), reverse=True)
    spec["storageClassName"] = defaults[0]["metadata"]["name"]


def admit_delete(ctx: ApiContext, rt: ResourceType, *, name: str) -> None:
    """Refuse to delete the namespaces the system depends on."""
    if rt.group == "" and rt.kind == "Namespace" and name in ctx.options.immortal_namespaces:
        raise Forbidden(
            f'namespaces "{name}" is forbidden: this namespace may not be deleted',
            kind="namespaces",
            name=name,
        )


async def mutate_dynamically(
    request: web.Request, attrs: Attributes, obj: Obj, *, old: Obj | None
) -> Obj:
    """``obj`` as the mutating webhooks leave it."""
    return await webhooks.mutate(request, attrs, obj, old)


async def validate_dynamically(
    request: web.Request, attrs: Attributes, obj: Obj | None, *, old: Obj | None
) -> None:
    """Refuse what a validating webhook or a ValidatingAdmissionPolicy refuses."""
    await webhooks.validate(request, attrs, obj, old)
    await validating_policy.validate(request, attrs, obj, old)


async def admit_connect(request: web.Request, attrs: Attributes, options: Obj) -> Obj:
    """A CONNECT (exec, port-forward) through the mutating webhooks, then the validating
    webhooks and policies, with the subresource's options (``PodExecOptions``...) as the object,
    as Kubernetes' ``ConnectResource`` admits it. Returns the options as the webhooks left them:
    the connection is made with those."""
    options = await webhooks.mutate(request, attrs, options, None)
    await validate_dynamically(request, attrs, options, old=None)
    return options


async def admit_delete_dynamically(request: web.Request, attrs: Attributes, *, old: Obj) -> None:
    """A DELETE through the mutating webhooks (which may only refuse it), then the validating
    webhooks and policies, as Kubernetes' delete admission runs them."""
    await webhooks.mutate_delete(request, attrs, old)
    await validate_dynamically(request, attrs, None, old=old)
